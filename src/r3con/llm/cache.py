"""A content-addressed cache of LLM calls in SQLite, so a rerun (or a resumed run) never pays twice.

The key is the SHA-256 of the canonical request (model, messages, parameters, response schema, sample
index) and the endpoint's identity. Only usable replies are stored: a call that failed, came back
empty or refused, or (for a structured request) holds no JSON that validates against the request's
schema is never cached, so a rerun asks for it again. A reply cut at max_tokens is stored only as what
the run kept of it (`cut.py`: the note to its last sentence, the records it completed), so a resume
gets the same kept reply without paying for it again.

Each reply is committed the moment it arrives (WAL mode, one short transaction), so a run killed with
SIGKILL loses no call that had returned. Several processes may share one cache file: SQLite's locking
serialises the writes and `busy_timeout` makes them wait instead of failing.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema

from ..db import open_private
from ..errors import ConfigError
from .json_reply import NoJSON, extract_json  # the very extraction the stages apply
from .replies import without_thinking
from .types import ChatRequest, Completion

_WINDOWS = """
CREATE TABLE IF NOT EXISTS windows (
    endpoint TEXT NOT NULL,
    model TEXT NOT NULL,
    window INTEGER NOT NULL,
    learned TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (endpoint, model, window)
)
"""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL,
    model TEXT NOT NULL,
    stage TEXT NOT NULL,
    content TEXT NOT NULL,
    reasoning TEXT,
    finish_reason TEXT,
    usage TEXT NOT NULL,
    created REAL NOT NULL,
    tool_calls TEXT
)
"""


def _create(db: sqlite3.Connection) -> None:
    db.execute(_SCHEMA)
    db.execute(_WINDOWS)
    if "tool_calls" not in {row[1] for row in db.execute("PRAGMA table_info(calls)")}:  # written before tool calling
        db.execute("ALTER TABLE calls ADD COLUMN tool_calls TEXT")


def cache_key(endpoint: str, request: ChatRequest) -> str:
    """The cache key of `request` sent to `endpoint` (its base URL); includes the sample index."""
    return hashlib.sha256(f"{endpoint.rstrip('/')}\x00{request.fingerprint()}".encode()).hexdigest()


class CallCache:
    """The SQLite file: `get(key)` and `put(key, ...)`; safe across threads and processes."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self._db = open_private(self.path, check_same_thread=False, setup=_create)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the LLM cache {self.path}: {exc}; pass --cache PATH or --no-cache") from exc
        self._lock = threading.Lock()

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute(
                "SELECT content, reasoning, finish_reason, usage, model, tool_calls FROM calls WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        content, reasoning, finish_reason, usage, model, tool_calls = row
        return Completion.from_record({"content": content, "reasoning": reasoning, "finish_reason": finish_reason,
                                       "usage": json.loads(usage), "model": model,
                                       "tool_calls": json.loads(tool_calls) if tool_calls else ()})

    def put(self, key: str, endpoint: str, stage: str, completion: Completion) -> None:
        record = completion.to_record()
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO calls (key, endpoint, model, stage, content, reasoning, finish_reason, usage,"
                " created, tool_calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, endpoint, record["model"], stage, record["content"], record["reasoning"],
                 record["finish_reason"], json.dumps(record["usage"]), time.time(),
                 json.dumps(record["tool_calls"]) if record["tool_calls"] else None),
            )

    def window(self, endpoint: str, model: str, window: int) -> dict[str, Any] | None:
        """What "too long" replies taught an earlier run of the window of `model` at `endpoint`, which said it
        was `window` (`Window.to_dict`), or None."""
        with self._lock:
            row = self._db.execute("SELECT learned FROM windows WHERE endpoint = ? AND model = ? AND window = ?",
                                   (endpoint, model, window)).fetchone()
        try:
            learned = json.loads(row[0]) if row is not None else None
        except ValueError:  # a damaged entry costs the requests that learn it again
            return None
        return learned if isinstance(learned, dict) else None

    def put_window(self, endpoint: str, model: str, window: int, learned: dict[str, Any]) -> None:
        """Keep what this run learned of the window, for the next run against the same endpoint and model."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO windows (endpoint, model, window, learned, created) "
                             "VALUES (?, ?, ?, ?, ?)", (endpoint, model, window, json.dumps(learned), time.time()))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def usable(request: ChatRequest, completion: Completion) -> bool:
    """Whether a reply may be cached: complete, not empty, not refused, and valid JSON where a schema asks."""
    if completion.finish_reason == "content_filter" or completion.refusal:
        return False
    if completion.finish_reason == "length" and not completion.usage.events.get("cut_kept"):
        return False  # cut, and not (yet) reduced to what it completed
    text = completion.content.strip() or (completion.reasoning or "").strip()
    if completion.tool_calls:
        return True
    if not text:
        return False
    if request.response_schema is None:
        return True
    try:
        value, _ = extract_json(without_thinking(text))
    except NoJSON:
        return False
    try:
        return bool(jsonschema.Draft202012Validator(dict(request.response_schema)).is_valid(value))
    except jsonschema.SchemaError:
        return False
