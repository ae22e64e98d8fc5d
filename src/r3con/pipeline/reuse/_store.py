"""The SQLite file of a question's runs (`store_path`, beside the LLM cache): what each answered call got,
each read's note, each part's records and the schema, and what the earlier finished runs left (`Previous`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...db import open_private
from ...errors import ConfigError
from ._keys import shown_digest

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, question TEXT NOT NULL, run_dir TEXT NOT NULL, finished INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS answered (
    run INTEGER NOT NULL, digest TEXT NOT NULL, stage TEXT NOT NULL, key TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS answered_digest ON answered (digest);
CREATE TABLE IF NOT EXISTS reads (
    run INTEGER NOT NULL, round INTEGER NOT NULL, content TEXT NOT NULL, source TEXT NOT NULL, note TEXT NOT NULL,
    full TEXT NOT NULL, refs TEXT NOT NULL, top TEXT NOT NULL DEFAULT '[]');
CREATE INDEX IF NOT EXISTS reads_run ON reads (run);
CREATE TABLE IF NOT EXISTS records (
    run INTEGER NOT NULL, content TEXT NOT NULL, final_note TEXT NOT NULL, records TEXT NOT NULL,
    shown TEXT NOT NULL DEFAULT '[]');
CREATE INDEX IF NOT EXISTS records_run ON records (run);
CREATE TABLE IF NOT EXISTS schemas (run INTEGER NOT NULL, schema TEXT NOT NULL);
"""


def store_path(cache_path: Path) -> Path:
    """The runs' record beside the LLM cache: llm.sqlite -> llm.reuse.sqlite."""
    return cache_path.with_name(f"{cache_path.stem}.reuse.sqlite")


@dataclass(frozen=True)
class Read:
    """One document part's read in one round of an earlier run: its note, the notes it was shown in full
    (`shown_digest` of their (content, note digest) pairs), the documents its note names (as (content, key)
    pairs), and the notes that ranked first for it (their contents)."""

    note: str
    full: str
    refs: frozenset[tuple[str, str]]
    top: frozenset[str] = frozenset()


@dataclass
class Previous:
    """What the earlier runs of a question left: where the LLM cache holds their replies, by request digest
    (`reply`), and from the last finished run its reads per (round, content), its sources, its records and
    final notes per content, its schema."""

    run_dir: str | None = None
    reply: Callable[[str], str | None] = lambda digest: None  # an earlier reply's cache key, by request digest
    reads: dict[tuple[int, str], Read] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # content -> the number of the document it was in
    records: dict[str, tuple[str, list[dict[str, Any]]]] = field(default_factory=dict)  # content -> (final note, records)
    shown: dict[str, tuple[str, str]] = field(default_factory=dict)
    """content -> the final notes its population call was shown (in full or listed; `shown_digest`), and a
    digest of their text; for the documents shown a selection of them (`FinalNotes.per_document`)"""
    schema: Mapping[str, Any] | None = None

    @property
    def found(self) -> bool:
        return self.run_dir is not None


def _shown(notes: str | list[list[str]]) -> str:
    """The notes a call was shown as the record holds them: their `shown_digest`, or, in a record from before
    (the pairs themselves), the digest of those."""
    return notes if isinstance(notes, str) else shown_digest((c, d) for c, d in notes)


def _create(db: sqlite3.Connection) -> None:
    db.executescript(_SCHEMA)
    if "top" not in {row[1] for row in db.execute("PRAGMA table_info(reads)")}:  # a record from before
        db.execute("ALTER TABLE reads ADD COLUMN top TEXT NOT NULL DEFAULT '[]'")
    if "shown" not in {row[1] for row in db.execute("PRAGMA table_info(records)")}:
        db.execute("ALTER TABLE records ADD COLUMN shown TEXT NOT NULL DEFAULT '[]'")


class ReuseStore:
    """The SQLite file of the runs' records (`store_path`)."""

    _FLUSH = 512  # calls written in one transaction

    def __init__(self, path: Path):
        self.path = Path(path)
        self._calls: list[tuple[int, str, str, str]] = []  # run, digest, stage, cache key
        try:
            self._db = open_private(self.path, setup=_create)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the reuse record {self.path}: {exc}; pass --no-cache (it turns the record off too)") from exc

    def close(self) -> None:
        self._flush()
        self._db.close()

    def previous(self, question: str) -> Previous:
        """What the earlier finished runs of `question` left (replies from all of them, the rest from the last);
        a run that did not finish is continued with `--resume`, where the LLM cache serves its calls."""
        db = self._db
        row = db.execute("SELECT id, run_dir FROM runs WHERE question = ? AND finished = 1 ORDER BY id DESC LIMIT 1",
                         (question,)).fetchone()
        if row is None:  # no finished run: no replies either, and no lookup per call
            return Previous()
        found = Previous(reply=lambda digest: self.reply(question, digest))
        run, found.run_dir = row
        for round_no, content, source, note, full, refs, top in db.execute(
                "SELECT round, content, source, note, full, refs, top FROM reads WHERE run = ?", (run,)):
            found.reads[(round_no, content)] = Read(note, _shown(json.loads(full)),
                                                    frozenset(tuple(p) for p in json.loads(refs)),
                                                    frozenset(json.loads(top)))
            found.sources[content] = source
        for content, final_note, records, shown in db.execute(
                "SELECT content, final_note, records, shown FROM records WHERE run = ?", (run,)):
            found.records[content] = (final_note, json.loads(records))
            seen = json.loads(shown)
            if isinstance(seen, dict):  # '[]': every note was shown, or a record from before
                found.shown[content] = (_shown(seen["notes"]), seen["digest"])
        schema = db.execute("SELECT schema FROM schemas WHERE run = ?", (run,)).fetchone()
        found.schema = json.loads(schema[0]) if schema else None
        return found

    def reply(self, question: str, digest: str) -> str | None:
        """Where the LLM cache holds the last reply a finished run of `question` got to the request with
        `digest` (looked up, not held: a record of 100,000 documents' calls stays on disk)."""
        row = self._db.execute("SELECT a.key FROM answered a JOIN runs r ON r.id = a.run WHERE a.digest = ? "
                               "AND r.question = ? AND r.finished = 1 ORDER BY a.rowid DESC LIMIT 1",
                               (digest, question)).fetchone()
        return str(row[0]) if row else None

    def begin(self, question: str, run_dir: Path) -> int:
        """A new run of `question`, unfinished until `finish`."""
        cursor = self._db.execute("INSERT INTO runs (question, run_dir) VALUES (?, ?)", (question, str(run_dir)))
        return int(cursor.lastrowid or 0)

    def call(self, run: int, digest: str, stage: str, key: str) -> None:
        """Record an answered call of `run` and its reply's cache key; written in batches (a run is only read
        once finished, and a resumed run records again every call it makes, from the LLM cache or not)."""
        self._calls.append((run, digest, stage, key))
        if len(self._calls) >= self._FLUSH:
            self._flush()

    def _flush(self) -> None:
        if self._calls:
            with self._transaction() as db:
                self._write_calls(db)

    def _write_calls(self, db: sqlite3.Connection) -> None:
        db.executemany("INSERT INTO answered (run, digest, stage, key) VALUES (?, ?, ?, ?)", self._calls)
        self._calls.clear()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one transaction: committed when the block ends, rolled back if it raises."""
        db = self._db
        db.execute("BEGIN")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def reads(self, run: int, reads: Iterable[tuple[int, str, str, str, str, Sequence[tuple[str, str]],
                                                 Sequence[str]]]) -> None:
        """The run's reads (round, content, source, note, shown in full (`shown_digest`), refs, top), written once its relevance
        is decided (then nothing of them is held) and read once the run is finished; any the run wrote
        before are replaced."""
        with self._transaction() as db:
            db.execute("DELETE FROM reads WHERE run = ?", (run,))
            db.executemany("INSERT INTO reads (run, round, content, source, note, full, refs, top) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           ((run, r, c, s, n, json.dumps(full), json.dumps(sorted(refs)), json.dumps(sorted(top)))
                            for r, c, s, n, full, refs, top in reads))

    def records(self, run: int, records: Iterable[tuple[str, str, Sequence[Mapping[str, Any]],
                                                         Mapping[str, Any] | None]]) -> None:
        """The run's records (content, final note, records, and the final notes its population was shown when
        chosen per document (`shown_digest`) with a digest of their text, as {"notes": ..., "digest": ...}, or None), written
        once its population is decided; any the run wrote before are replaced."""
        with self._transaction() as db:
            db.execute("DELETE FROM records WHERE run = ?", (run,))
            db.executemany("INSERT INTO records (run, content, final_note, records, shown) VALUES (?, ?, ?, ?, ?)",
                           ((run, c, n, json.dumps(list(rows), ensure_ascii=False),
                             json.dumps(shown if shown is not None else []))
                            for c, n, rows, shown in records))

    def finish(self, run: int, schema: Mapping[str, Any] | None) -> None:
        """The run's last calls and `schema`, in one transaction; then the run counts as finished (its reads
        and records, written as they were decided, are read from then on)."""
        with self._transaction() as db:
            self._write_calls(db)
            if schema is not None:
                db.execute("INSERT INTO schemas VALUES (?, ?)", (run, json.dumps(schema, ensure_ascii=False)))
            db.execute("UPDATE runs SET finished = 1 WHERE id = ?", (run,))
