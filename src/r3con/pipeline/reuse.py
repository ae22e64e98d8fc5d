"""The same question over a changed corpus: what a run may take from the earlier runs of that question.

Every run records, in a SQLite file beside the LLM cache (`llm.reuse.sqlite`: both say what earlier
calls gave, and `--no-cache` turns both off), per question (the task and the settings whose role is "request" or "question", `config.ROLES`): each answered call's request digest and where the LLM cache holds its reply (a reply is stored once, in the cache), and
per document part (by content: title and text) each round's note, the notes its read was shown in
full, and its records; and the schema. The next run of that question reads them:

- `exact`: a call whose request is byte for byte one the earlier runs sent gets the reply they got,
  without a call (`llm.layers.answered.Answered`, from the LLM cache: it counts as a cache hit); every
  other call is made. With a deterministic endpoint (what the LLM
  cache assumes too) the run's notes, records and answer are a fresh run's. A read's request is the
  document, the task and the notes it is shown, so a later-round read repeats exactly when its notes
  selection changed; with every note shown, that is whenever any note changed.
- `approximate`: as `exact`, and further a later-round read is skipped (its earlier note kept) unless a
  new or changed note ranks among the `TOP` notes that rank first for it (the notes selection's
  ranking, whether or not every note fits), or a note that ranked there, or one its note names, left
  the corpus; a document is populated again only when its final note changed (or it is new); the
  schema is kept unless a new one is asked for. The answer is always rebuilt.

Documents are known by content here (`content_key`); what requests call them, their numbers, comes
from their names (`corpus.document_numbers`), so adding or deleting documents changes no other
document's requests.
- `off`: nothing is read; the run is still recorded.

`Decisions` says per document part and stage what was reused or recomputed and why (reuse.json).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings
from ..corpus.documents import Document
from ..corpus.places import Parts, PerPart, places_of
from ..db import open_private
from ..errors import ConfigError
from ..llm.cache import CallCache
from ..llm.layers.answered import Answered
from ..llm.types import LLM, Completion
from ..notes.selection import Shown, round_entries
from ..notes.shown import ShownLog
from ..stages.populate import PopulateResult

Tables = Mapping[str, list[dict[str, Any]]]  # a document's records per table

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

def _part_key(record: Mapping[str, Any]) -> str:
    """The key of the document part a record was populated from ('12', '12.2')."""
    return f"{record['_doc']}.{record['_part']}" if "_part" in record else str(record["_doc"])


def store_path(cache_path: Path) -> Path:
    """The runs' record beside the LLM cache: llm.sqlite -> llm.reuse.sqlite."""
    return cache_path.with_name(f"{cache_path.stem}.reuse.sqlite")


def content_key(doc: Document) -> str:
    """A document part as its reads see it: its title and text (its number may change with the corpus); the
    text by its hash, which the corpus store keeps, so that a large corpus is not hashed again. 20 hex digits."""
    return content_digest(doc).hex()


def content_digest(doc: Document) -> bytes:
    """`content_key` as the 10 bytes it spells."""
    return hashlib.sha256(f"{doc.title}\x00{doc.part}\x00{doc.sha256}".encode("utf-8", "surrogatepass")).digest()[:10]


class Contents(Mapping[str, str]):
    """Each part's `content_key` by its key, in the parts' order: 10 bytes a part in one bytes object beside the
    parts' places (a string a part and a dict entry was some 120 B a part for the whole run)."""

    WIDTH = 10

    def __init__(self, parts: Sequence[Document]):
        self._at = places_of(parts)  # the run's one dict of them, for `Parts`
        self._digests = b"".join(map(content_digest, parts))

    def __getitem__(self, key: str) -> str:
        at = self._at[key] * self.WIDTH
        return self._digests[at:at + self.WIDTH].hex()

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)


def question_key(task: str, settings: Settings) -> str:
    """The question (`task_key`) and the settings that shape its requests and results
    (`Settings.question_settings`: the roles "request" and "question"), as one key."""
    shaping = settings.question_settings()
    return hashlib.sha256(json.dumps([task_key(task), shaping], sort_keys=True, default=str).encode()).hexdigest()[:24]


def task_key(task: str) -> str:
    """The task as a question: case, runs of white space and trailing punctuation do not make another one
    (its requests still hold the task as typed: `exact` finds the earlier run and repeats the calls whose
    text differs, `approximate` keeps its notes)."""
    return " ".join(task.casefold().split()).rstrip(_TRAILING).rstrip()


_TRAILING = "?!.,;: \u3002\uff1f\uff01"


def note_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


TOP = 3
"""`approximate` reads a later-round read again when a new or changed note ranks among the `TOP` notes
that rank first for it (`NotesChoice.top`: the notes selection's ranking, BM25 or embeddings, with the
task and the part's own last note as the query), whether or not every note fits."""


@dataclass(frozen=True)
class Read:
    """One document part's read in one round of an earlier run: its note, the notes it was shown in full
    (as (content, note digest) pairs), the documents its note names (as (content, key) pairs), and the
    notes that ranked first for it (their contents)."""

    note: str
    full: frozenset[tuple[str, str]]
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
    shown: dict[str, tuple[frozenset[tuple[str, str]], str]] = field(default_factory=dict)
    """content -> the final notes its population call was shown (in full or listed), and a digest of their
    text; for the documents shown a selection of them (`FinalNotes.per_document`)"""
    schema: Mapping[str, Any] | None = None

    @property
    def found(self) -> bool:
        return self.run_dir is not None


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
            found.reads[(round_no, content)] = Read(note, frozenset(tuple(p) for p in json.loads(full)),
                                                    frozenset(tuple(p) for p in json.loads(refs)),
                                                    frozenset(json.loads(top)))
            found.sources[content] = source
        for content, final_note, records, shown in db.execute(
                "SELECT content, final_note, records, shown FROM records WHERE run = ?", (run,)):
            found.records[content] = (final_note, json.loads(records))
            seen = json.loads(shown)
            if isinstance(seen, dict):  # '[]': every note was shown, or a record from before
                found.shown[content] = (frozenset(tuple(p) for p in seen["notes"]), seen["digest"])
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

    def reads(self, run: int, reads: Iterable[tuple[int, str, str, str, Sequence[tuple[str, str]],
                                                 Sequence[tuple[str, str]], Sequence[str]]]) -> None:
        """The run's reads (round, content, source, note, shown in full, refs, top), written once its relevance
        is decided (then nothing of them is held) and read once the run is finished; any the run wrote
        before are replaced."""
        with self._transaction() as db:
            db.execute("DELETE FROM reads WHERE run = ?", (run,))
            db.executemany("INSERT INTO reads (run, round, content, source, note, full, refs, top) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           ((run, r, c, s, n, json.dumps(sorted(full)), json.dumps(sorted(refs)), json.dumps(sorted(top)))
                            for r, c, s, n, full, refs, top in reads))

    def records(self, run: int, records: Iterable[tuple[str, str, Sequence[Mapping[str, Any]],
                                                         Mapping[str, Any] | None]]) -> None:
        """The run's records (content, final note, records, and the final notes its population was shown when
        chosen per document with a digest of their text, as {"notes": [...], "digest": ...}, or None), written
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


def _kept(cache: CallCache, where: Callable[[str], str | None], digest: str) -> tuple[Completion, str] | None:
    """An earlier run's reply to the request with `digest`, from the LLM cache, and its key there."""
    key = where(digest)
    if key is None:
        return None
    reply = cache.get(key)
    return (reply, key) if reply is not None else None


@dataclass
class Decisions:
    """Per stage and document part: reused or recomputed, and why (reuse.json). Under its stage a part's decision
    is the number of its (reused, why) pair in `kinds` (a handful of pairs in all), held in an array at the
    part's place in the run's parts (`PerPart` over `places`); the notes that ranked first for a later-round
    read are kept apart, only where there are some. The entries are made as reuse.json is written. A dict a
    stage and document was 550 B a document for the whole run at D = 3,000, a tuple each 105 B a stage
    (bench_engine heap), a dict of ints a stage some 40 B."""

    mode: str
    previous: str | None
    places: Mapping[str, int] = field(default_factory=dict)  # the run's parts' places (`Parts.places`)
    by_stage: dict[str, PerPart] = field(default_factory=dict)
    kinds: list[tuple[bool, str]] = field(default_factory=list)
    tops: dict[str, Tops] = field(default_factory=dict)
    _kind: dict[tuple[bool, str], int] = field(default_factory=dict, repr=False)

    def note(self, doc: str, stage: str, reused: bool, why: str, top: Sequence[str] = ()) -> None:
        """`doc`'s `stage` was reused or not, and `why`; `top`: the notes that ranked first for a later-round read."""
        kind = (reused, why)
        if kind not in self._kind:
            self._kind[kind] = len(self.kinds)
            self.kinds.append(kind)
        decided = self.by_stage.get(stage)
        if decided is None:
            decided = self.by_stage[stage] = PerPart(self.places)
        decided[doc] = self._kind[kind]
        tops = self.tops.get(stage)
        if top and tops is None:
            tops = self.tops[stage] = Tops(self.places)
        if tops is not None:
            tops[doc] = tuple(top)

    def of(self, stage: str, doc: str) -> tuple[bool, str, tuple[str, ...]] | None:
        """`doc`'s decision in `stage` (reused, why, top), or None when it has none there."""
        kind = self.by_stage[stage].get(doc) if stage in self.by_stage else None
        if kind is None:
            return None
        tops = self.tops.get(stage)
        return (*self.kinds[kind], tops.get(doc, ()) if tops is not None else ())

    def counts(self) -> dict[str, dict[str, int]]:
        """Per stage: how many document parts were reused and recomputed."""
        out: dict[str, dict[str, int]] = {}
        for stage, decided in self.by_stage.items():
            reused = sum(n for kind, n in Counter(decided.values()).items() if self.kinds[kind][0])
            out[stage] = {"reused": reused, "recomputed": len(decided) - reused}
        return out

    def whys(self) -> dict[str, dict[str, int]]:
        """Per stage: how many document parts for each reason."""
        out: dict[str, dict[str, int]] = {}
        for stage, decided in self.by_stage.items():
            whys: Counter[str] = Counter()
            for kind, count in Counter(decided.values()).items():
                whys[self.kinds[kind][1]] += count
            out[stage] = dict(whys.most_common())
        return out

    def recomputed(self) -> dict[str, dict[str, str]]:
        """Per document part, the stages it was recomputed in and why (the exceptions, when most is reused)."""
        out: dict[str, dict[str, str]] = {}
        for stage, decided in self.by_stage.items():
            for doc, kind in decided.items():
                reused, why = self.kinds[kind]
                if not reused:
                    out.setdefault(doc, {})[stage] = why
        return out

    def documents(self) -> Mapping[str, dict[str, dict[str, Any]]]:
        """Per document part and stage, {"reused", "why"} and, for a later-round read, "top": each document's
        made when it is read (reuse.json is written a document at a time)."""
        return _PerDocument(self)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "previous_run": self.previous, "counts": self.counts(), "why": self.whys(),
                "documents": self.documents()}


class Tops(Mapping[str, tuple[str, ...]]):
    """A stage's notes that ranked first for each later-round read (`TOP` at most), by the read's part: their
    places among the run's parts (`places`), each plus one in `BITS` bits of one number a part (`PerPart`); a
    tuple of their keys only for a read whose are not all among the parts. A tuple a read and its dict entry
    were some 100 B a part for the whole run."""

    BITS = 21  # a place plus one: parts up to 2 million (past that, the tuples)

    def __init__(self, places: Mapping[str, int]):
        self._places = places
        self._packed = PerPart(places)
        self._other: dict[str, tuple[str, ...]] = {}
        self._keys: list[str] | None = None  # the parts' keys by place, made when a top is first read back

    def __setitem__(self, doc: str, top: tuple[str, ...]) -> None:
        self._packed.pop(doc, None)
        self._other.pop(doc, None)
        if not top:
            return
        packed = self._pack(top)
        if packed is None:
            self._other[doc] = top
        else:
            self._packed[doc] = packed

    def __getitem__(self, doc: str) -> tuple[str, ...]:
        packed = self._packed.get(doc)
        if packed is None:
            return self._other[doc]
        if self._keys is None:
            self._keys = [""] * (max(self._places.values(), default=-1) + 1)
            for key, place in self._places.items():
                self._keys[place] = key
        mask, out = (1 << self.BITS) - 1, []
        while packed:
            out.append(self._keys[(packed & mask) - 1])
            packed >>= self.BITS
        return tuple(out)

    def __iter__(self) -> Iterator[str]:
        yield from self._packed
        yield from self._other

    def __len__(self) -> int:
        return len(self._packed) + len(self._other)

    def _pack(self, top: tuple[str, ...]) -> int | None:
        if len(top) * self.BITS > 63:
            return None
        packed = 0
        for i, key in enumerate(top):
            place = self._places.get(key)
            if place is None or place + 1 >= 1 << self.BITS:
                return None
            packed |= (place + 1) << (i * self.BITS)
        return packed


class _PerDocument(Mapping[str, dict[str, dict[str, Any]]]):
    """`Decisions.documents`: a document's stages; the documents of the first stage, then those new in each next
    one, each stage's in the parts' order."""

    def __init__(self, decisions: Decisions):
        self._decisions = decisions

    def __getitem__(self, doc: str) -> dict[str, dict[str, Any]]:
        out = {}
        for stage in self._decisions.by_stage:
            decided = self._decisions.of(stage, doc)
            if decided is not None:
                reused, why, top = decided
                out[stage] = {"reused": reused, "why": why, **({"top": list(top)} if top else {})}
        if not out:
            raise KeyError(doc)
        return out

    def __iter__(self) -> Iterator[str]:
        stages = list(self._decisions.by_stage.values())
        for i, decided in enumerate(stages):
            for doc in decided:
                if not any(doc in earlier for earlier in stages[:i]):
                    yield doc

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Reuse:
    """One run's use of its question's earlier runs: the LLM layer, the approximate mode's `keep_note`
    and `keep_records`, the decisions per document and stage, and the record for the next run."""

    def __init__(self, mode: str, store: ReuseStore | None, question: str, run_dir: Path,
                 parts: Sequence[Document], *, new_schema: bool = False):
        self.mode, self.store, self.new_schema = mode, store, new_schema
        self.previous = store.previous(question) if store is not None and mode != "off" else Previous()
        self.run = store.begin(question, run_dir) if store is not None else 0
        self.replanned(parts)
        self._reasons: dict[tuple[str, int], str] = {}  # why `keep_note` had a document read again
        self._earlier = {content for _, content in self.previous.reads}
        self._numbers = set(self.previous.sources.values())
        self.decisions = Decisions(mode, self.previous.run_dir, places_of(self.parts))
        self._layer: Answered | None = None
        self._finals_differ: bool | None = None  # `_finals_changed`, once compared

    @classmethod
    def open(cls, mode: str, cache_path: Path | None, task: str, settings: Settings, run_dir: Path,
             parts: Sequence[Document], *, new_schema: bool = False) -> Reuse:
        """The record beside the LLM cache file (`store_path`); with no cache, none: nothing is reused."""
        store = ReuseStore(store_path(cache_path)) if cache_path is not None else None
        return cls(mode, store, question_key(task, settings), run_dir, parts, new_schema=new_schema)

    def replanned(self, parts: Sequence[Document]) -> None:
        """The run's document parts, as first planned or planned again for a window learned mid-run: every
        decision and the record for the next run are of these parts."""
        self.parts = parts if isinstance(parts, Parts) else Parts(parts)  # the places its records share
        self.content = Contents(self.parts)
        self._key_of: dict[str, str] | None = None

    @property
    def key_of(self) -> Mapping[str, str]:
        """Each content present, its part's key: made when an earlier run's reads are compared (a first run
        never asks: a dict entry a document it would hold for nothing)."""
        if self._key_of is None:
            self._key_of = {c: k for k, c in self.content.items()}
        return self._key_of

    @property
    def approximate(self) -> bool:
        return self.mode == "approximate" and self.previous.found

    @property
    def top(self) -> int:
        """How many first-ranked notes each later-round read records and `keep_note` weighs (`TOP`; none
        when nothing is recorded or read)."""
        return TOP if self.store is not None or self.approximate else 0

    @property
    def note_keeper(self) -> Callable[[Document, int, Mapping[str, str] | None], str | None] | None:
        """`keep_note` under `approximate` (for `RelevanceOptions.keep`), else None."""
        return self.keep_note if self.approximate else None

    def records_keeper(self, final: Mapping[str, str]) -> Callable[[Document], Tables | None] | None:
        """`keep_records(final)` under `approximate` with the earlier schema kept (for `PopulateOptions.keep`)."""
        return self.keep_records(final) if self.schema() is not None else None

    def bind(self, llm: LLM, layer: Answered | None) -> LLM:
        """The client the run's stages call: `llm`, whose `layer` (the run's own stack's) now answers the
        earlier runs' identical requests and records every call; without one, `llm` behind a new layer
        (whose replies then do not count as cache hits)."""
        outer = layer is None
        cache = getattr(llm, "cache", None) if layer is None else layer.cache
        layer = Answered(llm) if layer is None else layer
        where, store, run = self.previous.reply, self.store, self.run
        if self.mode != "off" and cache is not None and self.previous.found:  # kept in the LLM cache alone
            layer.earlier = functools.partial(_kept, cache, where)
        layer.record = None if store is None else functools.partial(store.call, run)
        self._layer = layer
        return layer if outer else llm

    def _identities(self, shown: Mapping[str, str]) -> set[tuple[str, str]]:
        """Notes (document key -> text) as reads see them: each document's content and its note's digest."""
        return {(self.content[k], note_digest(text)) for k, text in shown.items()}

    def keep_note(self, doc: Document, round_no: int, top: Mapping[str, str] | None) -> str | None:
        """`--reuse approximate`: the earlier note of `doc` in `round_no`, unless a new or changed note ranks
        among the `TOP` notes that rank first for it (`top`, key -> text; None in round 1), or a note that
        ranked there in the earlier run left the corpus, or a document its note names left or was
        renumbered. Notes that rank lower do not matter to it, shown in full or not."""
        earlier = self.previous.reads.get((round_no, self.content[doc.key]))
        if earlier is None:
            return None
        if top is None:
            return earlier.note
        for content, digest in self._identities(top):
            before = self.previous.reads.get((round_no - 1, content))
            if before is None or note_digest(before.note) != digest:
                return self._reread(doc, round_no, f"a new or changed note ranks among its top {TOP}")
        if any(c not in self.key_of for c in earlier.top):
            return self._reread(doc, round_no, f"a note among its top {TOP} left the corpus")
        if any(self.key_of.get(c) != k for c, k in earlier.refs):
            return self._reread(doc, round_no, "a document its note names left or was renumbered")
        return earlier.note

    def _reread(self, doc: Document, round_no: int, why: str) -> str | None:
        """No note to keep: `doc` is read again in `round_no`, for the reason `why` (reuse.json says it)."""
        self._reasons[(doc.key, round_no)] = why
        return None

    def keep_records(self, final: Mapping[str, str]) -> Callable[[Document], Tables | None]:
        """`--reuse approximate`: for population, the earlier records of a document whose final note is
        unchanged (with the earlier schema kept)."""
        def keep(doc: Document) -> Tables | None:
            earlier = self.previous.records.get(self.content[doc.key])
            if earlier is None or earlier[0] != final.get(doc.key, ""):
                return None
            tables: dict[str, list[dict[str, Any]]] = {}
            for row in earlier[1]:
                tables.setdefault(row["_table"], []).append({k: v for k, v in row.items() if k != "_table"})
            return tables
        return keep

    def schema(self) -> Mapping[str, Any] | None:
        """`--reuse approximate`: the earlier run's schema, unless a new one is asked for."""
        return self.previous.schema if self.approximate and not self.new_schema else None

    def _why_new(self, doc: Document) -> str | None:
        """Why `doc` has no earlier read at all: new, or changed (a document of its number, that is of its
        name, was read before, with other content)."""
        if self.content[doc.key] in self._earlier:
            return None
        return "changed document" if str(doc.number) in self._numbers else "new document"

    def decide_relevance(self, rounds: Sequence[Mapping[str, str]], shown: Sequence[ShownLog],
                         kept: Sequence[frozenset[str]]) -> None:
        """What each read of each round reused, and why it was recomputed otherwise; the reads are written to the
        record at once. What each later-round read was shown (`shown`, per round from the second) is read back
        one read at a time: all of it at once would be most of what a run holds a document (bench_engine heap)."""
        layer = self._layer
        for r, notes in enumerate(rounds, start=1):
            stage = f"relevance-{r}"
            log = shown[r - 2] if 2 <= r <= len(shown) + 1 else None
            for doc in self.parts:
                if doc.key not in notes:
                    continue
                seen = log.get(doc.key) if log is not None else None
                top = seen.top if seen is not None else ()
                if r - 1 < len(kept) and doc.key in kept[r - 1]:
                    self.decisions.note(doc.key, stage, True, "kept: same document" if r == 1 else
                                        f"kept: no new or changed note among its top {TOP}", top)
                    continue
                where = ("relevance", doc.key, r)
                if layer is not None and layer.replayed[where] and not layer.sent[where]:
                    self.decisions.note(doc.key, stage, True, "same request", top)
                    continue
                why = self._why_new(doc) if self.previous.found else "no earlier run"
                if why is None and (doc.key, r) in self._reasons:
                    why = self._reasons[(doc.key, r)]
                elif why is None:
                    earlier = self.previous.reads.get((r, self.content[doc.key]))
                    full = seen.full if seen is not None else ()
                    if earlier is None:
                        why = "no earlier read in this round"
                    elif r >= 2 and self._identities({k: rounds[r - 2].get(k, "") for k in full}) != earlier.full:
                        why = ("every note is shown, and the notes changed" if seen is not None and
                               seen.why == "every note" else "notes shown changed")
                    else:
                        why = "request changed (placement or notes shown)"
                self.decisions.note(doc.key, stage, False, why, top)
        if self.store is not None:
            self.store.reads(self.run, self._reads(rounds, shown))

    def _reads(self, rounds: Sequence[Mapping[str, str]], shown: Sequence[ShownLog]) -> Iterator[
            tuple[int, str, str, str, list[tuple[str, str]], list[tuple[str, str]], list[str]]]:
        """The reads as the record keeps them, one at a time as the store writes them: at D = 100,000 the
        notes each read was shown in full are millions of pairs, too many to hold at once."""
        content = self.content
        by_key = {p.key: p for p in self.parts}
        for r, notes in enumerate(rounds, start=1):
            log = shown[r - 2] if 2 <= r <= len(shown) + 1 else None
            digests: dict[str, str] = {}  # the earlier round's note digests, each computed once
            for entry in round_entries(self.parts, notes):
                key = entry["doc"]
                seen = log.get(key) if log is not None else None
                full = []
                for k in seen.full if seen is not None else ():
                    if k not in digests:
                        digests[k] = note_digest(rounds[r - 2].get(k, ""))
                    full.append((content[k], digests[k]))
                named = [(content[k], k) for k in entry["refs"] if k in content]
                top = [content[k] for k in (seen.top if seen is not None else ()) if k in content]
                # the `source` column holds the document's identity, its number (`corpus.document_numbers`)
                yield r, content[key], str(by_key[key].number), entry["note"], full, named, top

    def decide_populate(self, filled: PopulateResult, final: Mapping[str, str], schema: Mapping[str, Any]) -> None:
        """What each document's population reused, and why it was recomputed otherwise; the records of the
        documents populated, and the final notes each was shown (chosen per document), are written to the
        record at once."""
        shown = filled.shown
        layer = self._layer
        for doc in self.parts:
            if doc.key not in filled.per_doc:
                continue
            if doc.key in filled.kept:
                self.decisions.note(doc.key, "populate", True, "kept: final note unchanged")
                continue
            where = ("populate", doc.key, None)
            if layer is not None and layer.replayed[where] and not layer.sent[where]:
                self.decisions.note(doc.key, "populate", True, "same request")
                continue
            why = self._why_new(doc) if self.previous.found else "no earlier run"
            self.decisions.note(doc.key, "populate", False, why or self._why_populated(doc, final, schema, shown))
        if self.store is not None:
            self.store.records(self.run, self._records(filled, final, shown))

    def _records(self, filled: PopulateResult, final: Mapping[str, str], shown: ShownLog) -> Iterator[
            tuple[str, str, list[dict[str, Any]], dict[str, Any] | None]]:
        """The records as the record keeps them: per document populated, its content, final note, records and
        the final notes it was shown when chosen per document."""
        # each table holds its records in the order of the documents (`filled.per_doc`'s), so a document's are
        # the next run of each table's: taken as the documents come, not grouped for all of them first
        tables = [(name, iter(rows)) for name, rows in filled.tables.items()]
        ahead: list[Mapping[str, Any] | None] = [next(rows, None) for _, rows in tables]
        content = self.content
        for k in filled.per_doc:
            records = []
            for i, (name, rows) in enumerate(tables):
                while (row := ahead[i]) is not None and _part_key(row) == k:
                    records.append({**row, "_table": name})
                    ahead[i] = next(rows, None)
            seen = shown.get(k)
            yield (content[k], final.get(k, ""), records,
                   {"notes": sorted(self._population_notes(seen, final)), "digest": seen.digest}
                   if seen is not None else None)

    def _why_populated(self, doc: Document, final: Mapping[str, str], schema: Mapping[str, Any],
                       filled: ShownLog) -> str:
        """Why a document an earlier run populated was populated again: its final note, the schema, or the
        final notes it was shown (its own selection, or every note) changed."""
        content = self.content[doc.key]
        earlier = self.previous.records.get(content)
        if earlier is None:
            return "no earlier records"
        if earlier[0] != final.get(doc.key, ""):
            return "final note changed"
        if self.previous.schema is not None and dict(self.previous.schema) != dict(schema):
            return "schema changed"
        shown, before = filled.get(doc.key), self.previous.shown.get(content)
        if shown is not None or before is not None:
            if shown is None or before is None or self._population_notes(shown, final) != before[0]:
                return "notes shown changed"
            if shown.digest != before[1]:
                return "notes shown arranged otherwise (the same notes)"
        elif self._finals_changed(final):
            return "every note is shown, and the notes changed"
        return "request changed (placement or notes shown)"

    def _population_notes(self, shown: Shown, final: Mapping[str, str]) -> set[tuple[str, str]]:
        """The final notes a population call was shown, in full or listed (document content, note digest)."""
        return self._identities({k: final.get(k, "") for k in (*shown.full, *shown.listed)})

    def _finals_changed(self, final: Mapping[str, str]) -> bool:
        """Whether the final notes (every one: what population shows when all fit) differ from the earlier
        run's; compared once a run (each set holds a note per document)."""
        if self._finals_differ is None:
            now = self._identities({k: v for k, v in final.items() if v and k in self.content})
            before = {(c, note_digest(note)) for c, (note, _) in self.previous.records.items() if note}
            self._finals_differ = now != before
        return self._finals_differ

    def summary(self) -> dict[str, Any]:
        """For the manifest and `--json`: the mode, the earlier run, counts per stage, calls reused."""
        layer = self._layer
        return {"mode": self.mode, "previous_run": self.previous.run_dir, "counts": self.decisions.counts(),
                "why": self.decisions.whys(),
                "recomputed": self.decisions.recomputed() if self.previous.found else {},
                "calls_reused": sum(layer.replayed.values()) if layer else 0,
                "prompt_tokens_reused": layer.replayed_usage.prompt_tokens if layer else 0}

    def finish(self, schema: Mapping[str, Any] | None) -> None:
        """The run finished: its `schema` to the record, and the run with it, for the next run of the question
        (its reads and records were written as they were decided)."""
        if self.store is not None:
            self.store.finish(self.run, schema)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

