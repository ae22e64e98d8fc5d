"""A content-addressed cache of LLM calls in SQLite, so a rerun (or a resumed run) never pays twice.

The key is the SHA-256 of the canonical request (model, messages, parameters, response schema, sample
index) and the endpoint's identity. Only usable replies are stored: a call that failed, came back
empty or refused, or (for a structured request) holds no JSON that validates against the request's
schema is never cached, so a rerun asks for it again. A reply cut at max_tokens is stored only as what
the run kept of it (`cut.py`: the note to its last sentence, the records it completed), so a resume
gets the same kept reply without paying for it again.

Replies are committed in groups (WAL mode, one short transaction a group): every `group` replies (GROUP_CALLS
in a run whose calls.jsonl keeps the replies), or at the first read or write once GROUP_S has passed since the
oldest one not yet written, and when the cache closes. A run killed with SIGKILL loses from the cache at most the
replies of the group not yet written; `--resume` of its folder still pays for none of them (calls.jsonl holds every
reply, flushed as it arrives, and `Answered` serves them from there), while a new run of the same question
asks them again. Where calls.jsonl keeps no replies (`--log-calls meta`, or no run folder) each reply is
committed as it arrives (`group` 1). Several processes may share one cache file: SQLite's locking serialises
the writes and `busy_timeout` makes them wait instead of failing; another process sees a group once written.
"""

from __future__ import annotations

import contextlib
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
from .conforms import conforms
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


GROUP_CALLS = 32  # replies a transaction writes at most, where calls.jsonl keeps them too (the module's docstring)
GROUP_S = 0.5  # the longest a reply waits to be written, while the cache is in use

_INSERT = ("INSERT OR REPLACE INTO calls (key, endpoint, model, stage, content, reasoning, finish_reason, usage, created,"
           " tool_calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


class CallCache:
    """The SQLite file: `get(key)` and `put(key, ...)`; safe across threads and processes. `group`: the most
    replies written in one transaction (the module's docstring says what a kill may lose)."""

    def __init__(self, path: Path, group: int = 1):
        self.path = Path(path)
        try:
            self._db = open_private(self.path, check_same_thread=False, setup=_create)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the LLM cache {self.path}: {exc}; pass --cache PATH or --no-cache") from exc
        self._lock = threading.Lock()
        self.group = max(1, group)
        self._pending: dict[str, tuple[Any, ...]] = {}  # rows not yet written, by key
        self._oldest = 0.0  # when the oldest of them was put (time.monotonic)

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._pending.get(key)
            if row is not None:
                row = (row[4], row[5], row[6], row[7], row[2], row[9])
            else:
                self._write_if_due()
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
        """Keep `completion` under `key`: written now, or with its group (OSError or sqlite3.Error when the
        group's write fails: its rows stay pending, for the next try)."""
        record = completion.to_record()
        row = (key, endpoint, record["model"], stage, record["content"], record["reasoning"], record["finish_reason"],
               json.dumps(record["usage"]), time.time(), json.dumps(record["tool_calls"]) if record["tool_calls"] else None)
        with self._lock:
            if not self._pending:
                self._oldest = time.monotonic()
            self._pending[key] = row
            if len(self._pending) >= self.group:
                self._write()
            else:
                self._write_if_due()

    def flush(self) -> None:
        """Write the replies not yet written."""
        with self._lock:
            self._write()

    def _write_if_due(self) -> None:
        if self._pending and time.monotonic() - self._oldest >= GROUP_S:
            self._write()

    def _write(self) -> None:
        """The pending rows in one transaction (the caller holds the lock)."""
        if not self._pending:
            return
        rows = list(self._pending.values())
        if len(rows) == 1:
            self._db.execute(_INSERT, rows[0])
        else:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(_INSERT, rows)
                self._db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # a failed COMMIT may have ended the transaction already
                    self._db.execute("ROLLBACK")
                raise
        self._pending.clear()

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
            self._write()
            return int(self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            try:
                self._write()
            finally:
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
        return conforms(request.response_schema, value)
    except jsonschema.SchemaError:
        return False
