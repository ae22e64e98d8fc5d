"""The corpus store: what does not depend on the question, done once per document content and kept.

One SQLite file (`corpus.sqlite`) in the corpus folder (`--corpus-dir`, `R3CON_CORPUS_DIR`; by default
beside the LLM cache). Everything in it is keyed by content, never by path, so a renamed file is
recognised by its bytes and two folders with the same files share their work:

- `files`: path -> size, mtime, ctime, inode, device and the SHA-256 of its bytes. A file whose stat
  matches on all five is neither read nor hashed (git's index checks these, less the device); one
  whose mtime or ctime was within two seconds of being recorded is hashed again next time (a write
  in the same tick would change neither). Restoring an edited file's mtime (`touch -d`, `os.utime`)
  sets its ctime to now, so an edit of the same size is seen.
- `readings`: the bytes' SHA-256 and suffix -> what the reader made of them (title, the text's
  SHA-256, encoding, warning, or why it holds no text). PDF extraction and decoding happen once.
- `texts`: the text's SHA-256 (the manifest's `sha256`) -> the text and its estimated tokens.
- `parts`: text SHA-256 and part budget -> where the splitter cut it (offsets, lengths, tokens).
- `terms`: text SHA-256 and tokenizer -> its term counts, from which a BM25 index is built without
  tokenizing again (`retrieval.BM25.from_counts`).
- `embeddings`: embeddings model and text SHA-256 -> the vector.

Why SQLite: it is in the standard library (no new dependency), the LLM cache already uses it, it
takes point look-ups by key and small transactions (a killed load loses nothing committed), and
several processes may share one file. DuckDB and Parquet are columnar formats for scans, not for
this key-value workload.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..db import open_private
from ..errors import ConfigError, InputError
from .documents import Document, FilesSeen, split_documents, with_tokens
from .readers import FileText, NotText, read_document
from .walk import real_path

STORE_FILE = "corpus.sqlite"
READER_VERSION = "1"  # bump when a reader's output changes: readings are keyed by it
SPLIT_VERSION = "1"  # bump when the splitter's cuts change: parts are keyed by it
_RACY_NS = 2_000_000_000  # a file changed (mtime or ctime) this close to being recorded is hashed again next time
_BATCH = 2000  # rows per transaction while loading

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, inode INTEGER NOT NULL,
    raw TEXT NOT NULL, suffix TEXT NOT NULL, recorded REAL NOT NULL, ctime_ns INTEGER, dev INTEGER);
CREATE TABLE IF NOT EXISTS readings (
    raw TEXT NOT NULL, suffix TEXT NOT NULL, reader TEXT NOT NULL, title TEXT, sha TEXT, encoding TEXT,
    warning TEXT, skip_kind TEXT, skip_reason TEXT, PRIMARY KEY (raw, suffix, reader));
CREATE TABLE IF NOT EXISTS texts (sha TEXT PRIMARY KEY, text TEXT NOT NULL, tokens INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS parts (
    sha TEXT NOT NULL, budget INTEGER NOT NULL, splitter TEXT NOT NULL, spans TEXT NOT NULL,
    PRIMARY KEY (sha, budget, splitter));
CREATE TABLE IF NOT EXISTS terms (
    sha TEXT NOT NULL, tokenizer TEXT NOT NULL, counts TEXT NOT NULL, PRIMARY KEY (sha, tokenizer));
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL, sha TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, sha));
"""
# columns added since the first stores: an older file gets them (NULL: its files are hashed once again)
_ADDED = (("files", "ctime_ns", "INTEGER"), ("files", "dev", "INTEGER"))
_FILE_COLUMNS = "path, size, mtime_ns, inode, raw, suffix, recorded, ctime_ns, dev"
Stat = tuple[int, int, int, int, int]  # what decides "unchanged": size, mtime_ns, ctime_ns, inode, dev

Embed = Callable[[Sequence[str]], Awaitable[list[list[float]]]]


def raw_hash(data: bytes) -> str:
    """The SHA-256 of a file's bytes: what the store knows a file's content by."""
    return hashlib.sha256(data).hexdigest()


def text_hash(text: str) -> str:
    """The SHA-256 of a text (as `Document.sha256`): the key of everything the store keeps of it."""
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


@dataclass(frozen=True)
class PartSpan:
    """One part of a stored text: `part` of `parts`, `text[offset:offset + length]`, its estimated tokens."""

    part: int
    parts: int
    offset: int
    length: int
    tokens: int


@dataclass(frozen=True)
class Split:
    """Documents split into parts through the store: the parts, and how many documents' cuts (and token
    counts) came from it (`reused`) or were computed and kept (`computed`)."""

    parts: tuple[Document, ...]
    reused: int = 0
    computed: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"documents_reused": self.reused, "documents_split": self.computed, "parts": len(self.parts)}


@dataclass
class EmbeddingsSeen:
    """Texts an embed function wrapped by `CorpusStore.embedder` took from the store or had embedded."""

    reused: int = 0
    computed: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"reused": self.reused, "computed": self.computed}


class CorpusStore:
    """The SQLite store in `folder`; safe across threads and processes. Use as a context manager or `close()`."""

    def __init__(self, folder: Path):
        self.folder = Path(folder).expanduser()
        self.path = self.folder / STORE_FILE
        try:
            self._db = open_private(self.path, check_same_thread=False, setup=_create)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the corpus store {self.path}: {exc}; "
                              "pass --corpus-dir DIR or --no-corpus-store") from exc
        self._lock = threading.Lock()

    def __enter__(self) -> CorpusStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- look-ups by content hash (the interface docs/store.md describes) --

    def text(self, sha: str) -> str | None:
        """The text whose SHA-256 is `sha`, or None when the store does not hold it."""
        row = self._one("SELECT text FROM texts WHERE sha = ?", (sha,))
        return None if row is None else _str(row[0])

    def tokens(self, sha: str) -> int | None:
        """The estimated tokens of the text `sha`, or None."""
        row = self._one("SELECT tokens FROM texts WHERE sha = ?", (sha,))
        return None if row is None else int(row[0])

    def spans(self, sha: str, budget: int) -> tuple[PartSpan, ...] | None:
        """Where the text `sha` is cut into parts of at most `budget` tokens, or None when not split yet."""
        row = self._one("SELECT spans FROM parts WHERE sha = ? AND budget = ? AND splitter = ?",
                        (sha, budget, SPLIT_VERSION))
        return None if row is None else _spans(row[0])

    def has(self, sha: str) -> bool:
        """Whether the store holds the text `sha`."""
        return self._one("SELECT 1 FROM texts WHERE sha = ?", (sha,)) is not None

    # -- loading files --

    def reader(self, pdf_password: str | None = None) -> StoredReader:
        """A reader for one corpus load: `read(path)` per file, then `finish(roots)`."""
        return StoredReader(self, pdf_password)

    # -- splitting --

    def split(self, docs: Sequence[Document], budget: int) -> Split:
        """`split_documents(docs, budget)`, with each document's cuts and token counts from the store when
        it holds them, else computed and kept. The parts are the same either way."""
        out: list[Document] = []
        reused = computed = 0
        new: list[tuple[str, int, str, str]] = []
        held = dict(self._all("SELECT sha, spans FROM parts WHERE budget = ? AND splitter = ?", (budget, SPLIT_VERSION)))
        for doc in docs:
            sha = doc.sha256  # `text_hash`, known from the load
            spans = _spans(held[sha]) if sha in held else None
            if spans is None:
                pieces = split_documents([doc], budget)
                spans = tuple(PartSpan(p.part, p.parts, p.offset, len(p.text), p.tokens) for p in pieces)
                new.append((sha, budget, SPLIT_VERSION, json.dumps([[s.offset, s.length, s.tokens] for s in spans])))
                out.extend(pieces)
                computed += 1
                if len(new) >= _BATCH:
                    self._write("INSERT OR REPLACE INTO parts VALUES (?, ?, ?, ?)", new)
                    new = []
                continue
            reused += 1
            if len(spans) == 1 and spans[0].length == len(doc.text):
                out.append(with_tokens(doc, spans[0].tokens))
                continue
            for s in spans:
                part = replace(doc, text=doc.text[s.offset:s.offset + s.length], part=s.part, parts=s.parts,
                               offset=s.offset)
                out.append(with_tokens(part, s.tokens))
        self._write("INSERT OR REPLACE INTO parts VALUES (?, ?, ?, ?)", new)
        return Split(tuple(out), reused, computed)

    # -- BM25 and embeddings --

    def term_counts(self, texts: Sequence[str], tokenizer: str,
                    tokenize: Callable[[str], list[str]]) -> tuple[list[Mapping[str, int]], int]:
        """Each text's term counts under `tokenize` (named `tokenizer`), from the store when it holds them;
        and how many it held. Build the index with `retrieval.BM25.from_counts`."""
        counts: list[Mapping[str, int]] = []
        new: list[tuple[str, str, str]] = []
        held = 0
        for text in texts:
            sha = text_hash(text)
            row = self._one("SELECT counts FROM terms WHERE sha = ? AND tokenizer = ?", (sha, tokenizer))
            if row is not None:
                counts.append(json.loads(row[0]))
                held += 1
                continue
            c = Counter(tokenize(text))
            counts.append(c)
            new.append((sha, tokenizer, json.dumps(c, ensure_ascii=False)))
        self._write("INSERT OR REPLACE INTO terms VALUES (?, ?, ?)", new)
        return counts, held

    def embedder(self, embed: Embed, model: str) -> tuple[Embed, EmbeddingsSeen]:
        """`embed`, with each text's vector from the store when it holds one for `model`, else embedded
        and kept; and the counts of both, as the calls go."""
        seen = EmbeddingsSeen()

        async def stored(texts: Sequence[str]) -> list[list[float]]:
            shas = [text_hash(t) for t in texts]
            found: dict[str, list[float]] = {}
            for sha in dict.fromkeys(shas):
                row = self._one("SELECT vector FROM embeddings WHERE model = ? AND sha = ?", (model, sha))
                if row is not None:
                    found[sha] = np.frombuffer(row[0], dtype=np.float32).tolist()
            missing = [i for i, sha in enumerate(shas) if sha not in found]
            unique = list(dict.fromkeys(shas[i] for i in missing))
            first = {sha: next(i for i in missing if shas[i] == sha) for sha in unique}
            if unique:
                vectors = await embed([texts[first[sha]] for sha in unique])
                rows = []
                for sha, vector in zip(unique, vectors, strict=True):
                    found[sha] = list(vector)
                    rows.append((model, sha, np.asarray(vector, dtype=np.float32).tobytes()))
                self._write("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)", rows)
            seen.reused += len(shas) - len(missing)
            seen.computed += len(missing)
            return [found[sha] for sha in shas]

        return stored, seen

    # -- the connection --

    def _one(self, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        with self._lock:
            row: tuple[Any, ...] | None = self._db.execute(sql, args).fetchone()
            return row

    def _all(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _write(self, sql: str, rows: Iterable[tuple[Any, ...]]) -> None:
        self._write_all([(sql, list(rows))])

    def _write_all(self, writes: Sequence[tuple[str, list[tuple[Any, ...]]]]) -> None:
        """Each (statement, rows) in one transaction: a killed process leaves all of them or none."""
        if not any(rows for _, rows in writes):
            return
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                for sql, rows in writes:
                    self._db.executemany(sql, rows)
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise ConfigError(f"cannot write the corpus store {self.path}: {exc}; "
                                  "pass --corpus-dir DIR or --no-corpus-store") from exc


def _create(db: sqlite3.Connection) -> None:
    db.executescript(_SCHEMA)
    _add_columns(db)


def _add_columns(db: sqlite3.Connection) -> None:
    """Bring a store written by an earlier r3con up to `_SCHEMA` (another process may be doing the same)."""
    for table, column, kind in _ADDED:
        if column in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
            continue
        try:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):
                raise


def _stat(stat: os.stat_result) -> Stat:
    return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev


def _bytes(text: str) -> bytes:
    """A path, title or text as stored: UTF-8, with the lone surrogates a file name's undecodable bytes or a
    JSON escape leave in a str kept as they are (SQLite's TEXT would refuse them)."""
    return text.encode("utf-8", "surrogatepass")


def _str(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def _under(prefix: str) -> tuple[bytes, bytes]:
    """The bounds of the stored paths that start with the folder `prefix` (which ends in a separator)."""
    return _bytes(prefix), _bytes(prefix[:-1] + chr(ord(os.sep) + 1))


def _spans(raw: str) -> tuple[PartSpan, ...]:
    cuts = json.loads(raw)
    return tuple(PartSpan(i, len(cuts), offset, length, tokens)
                 for i, (offset, length, tokens) in enumerate(cuts, start=1))


@dataclass
class StoredReader:
    """Reads a corpus's files through the store: `read(path)` for each, then `finish(roots)`."""

    store: CorpusStore
    pdf_password: str | None = None
    _known: dict[str, tuple[Stat, str, str]] = field(default_factory=dict)  # real path -> stat, raw hash, suffix
    _folders: dict[str, str] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)
    _files: list[tuple[Any, ...]] = field(default_factory=list)
    _texts: list[tuple[Any, ...]] = field(default_factory=list)
    _readings: list[tuple[Any, ...]] = field(default_factory=list)
    _counts: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._preloaded: dict[str, tuple[Any, ...]] = {}
        self._prefixes: list[str] = []  # the folders `preload` read: _known holds every path under them

    def preload(self, roots: Sequence[str | Path]) -> None:
        """Read what the store holds for the files under the folders `roots` (their stat and hash, and
        their reading) in one query per folder, rather than one per file (a second load of a large folder)."""
        for root in roots:
            folder = Path(root).expanduser()
            if not folder.is_dir():
                continue
            prefix = real_path(folder).rstrip(os.sep) + os.sep
            self._prefixes.append(prefix)
            for row in self.store._all(
                    "SELECT f.path, f.size, f.mtime_ns, f.ctime_ns, f.inode, f.dev, f.raw, f.suffix, r.raw, r.title, "
                    "r.sha, r.encoding, r.warning, r.skip_kind, r.skip_reason, t.text FROM files f "
                    "LEFT JOIN readings r ON r.raw = f.raw AND r.suffix = f.suffix AND r.reader = ? "
                    "LEFT JOIN texts t ON t.sha = r.sha WHERE f.path >= ? AND f.path < ?",
                    (READER_VERSION, *_under(prefix))):
                path = _str(row[0])
                self._known[path] = (cast(Stat, tuple(row[1:6])), row[6], row[7])
                if row[8] is not None:
                    self._preloaded[path] = row[9:]

    def _stat_of(self, key: str) -> tuple[Stat, str, str] | None:
        """What the store knows of the file at the real path `key`: its stat as recorded (`Stat`; a racy or
        unknown part as -1 or None, which no stat matches), raw hash and suffix."""
        if key in self._known or any(key.startswith(prefix) for prefix in self._prefixes):
            return self._known.get(key)
        row = self.store._one("SELECT size, mtime_ns, ctime_ns, inode, dev, raw, suffix FROM files WHERE path = ?",
                              (_bytes(key),))
        if row is not None:
            self._known[key] = (cast(Stat, tuple(row[:5])), row[5], row[6])
        return self._known.get(key)

    def read(self, path: Path, real: str | None = None) -> tuple[FileText, str]:
        """The file's title and text, and the text's SHA-256; NotText or InputError as `read_document`.
        `real`: its real path, when the walk that found it has it (`_walk.Found`)."""
        key = real or real_path(path, self._folders)
        self._seen.add(key)
        suffix = path.suffix.lower()
        try:
            stat = os.stat(path)
        except OSError as exc:
            raise InputError(f"cannot read it: {exc.strerror or exc}; check the path and its permissions") from exc
        known = self._stat_of(key)
        now = _stat(stat)
        reading = None
        if known is not None and known[0] == now and known[2] == suffix:
            reading = self._preloaded.pop(key, None) or self._reading(known[1], suffix)
            if reading is not None:
                self._counts["unchanged"] += 1
                return self._deliver(reading)
        try:
            raw_bytes = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read it: {exc.strerror or exc}; check the path and its permissions") from exc
        raw = raw_hash(raw_bytes)
        del raw_bytes
        reading = self._reading(raw, suffix)
        if reading is not None:
            self._counts["touched" if known is not None else "renamed"] += 1
        else:
            reading = self._extract(path, raw, suffix)
            self._counts["read"] += 1
        # racy: a write in the tick the file was last changed in would leave mtime and ctime as they are, so
        # such a file is recorded with no mtime and hashed again next time (git's racy-git rule, by the clock)
        racy = max(stat.st_mtime_ns, stat.st_ctime_ns) >= time.time_ns() - _RACY_NS
        self._files.append((_bytes(key), stat.st_size, -1 if racy else stat.st_mtime_ns, stat.st_ino, raw, suffix,
                            time.time(), stat.st_ctime_ns, stat.st_dev))
        if len(self._files) >= _BATCH:
            self._flush()
        return self._deliver(reading)

    def finish(self, roots: Sequence[str | Path] = ()) -> FilesSeen:
        """Record the files read; forget paths under the folders `roots` that were not seen (deleted or
        now excluded). The counts of this load."""
        self._flush()
        gone: list[tuple[bytes]] = []
        for root in roots:
            folder = Path(root).expanduser()
            if not folder.is_dir():
                continue
            prefix = real_path(folder).rstrip(os.sep) + os.sep
            known = ([p for p in self._known if p.startswith(prefix)] if prefix in self._prefixes else
                     [_str(row[0]) for row in self.store._all("SELECT path FROM files WHERE path >= ? AND path < ?",
                                                               _under(prefix))])
            gone += [(_bytes(p),) for p in known if p not in self._seen]
        self.store._write("DELETE FROM files WHERE path = ?", gone)
        c = self._counts
        return FilesSeen(unchanged=c["unchanged"], touched=c["touched"], renamed=c["renamed"], read=c["read"],
                         deleted=len(gone))

    def _flush(self) -> None:
        self.store._write_all([("INSERT OR IGNORE INTO texts VALUES (?, ?, ?)", self._texts),
                               ("INSERT OR REPLACE INTO readings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", self._readings),
                               (f"INSERT OR REPLACE INTO files ({_FILE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                self._files)])
        self._files, self._texts, self._readings = [], [], []

    def _reading(self, raw: str, suffix: str) -> tuple[Any, ...] | None:
        return self.store._one(
            "SELECT r.title, r.sha, r.encoding, r.warning, r.skip_kind, r.skip_reason, t.text FROM readings r "
            "LEFT JOIN texts t ON t.sha = r.sha WHERE r.raw = ? AND r.suffix = ? AND r.reader = ?",
            (raw, suffix, READER_VERSION))

    def _extract(self, path: Path, raw: str, suffix: str) -> tuple[Any, ...]:
        try:
            got = read_document(path, pdf_password=self.pdf_password)
        except NotText as exc:  # a property of the bytes: kept, so the file is not read again
            row: tuple[Any, ...] = (None, None, None, None, exc.kind, exc.reason, None)
        else:
            from ..tokens import estimate_tokens

            sha = text_hash(got.text)
            self._texts.append((sha, _bytes(got.text), estimate_tokens(got.text)))
            row = (got.title, sha, got.encoding, got.warning, None, None, got.text)
        title, sha, encoding, warning, skip_kind, skip_reason = row[:6]
        self._readings.append((raw, suffix, READER_VERSION, None if title is None else _bytes(title), sha, encoding,
                               None if warning is None else _bytes(warning), skip_kind,
                               None if skip_reason is None else _bytes(skip_reason)))  # with the file's row, in `_flush`
        return row

    @staticmethod
    def _deliver(reading: tuple[Any, ...]) -> tuple[FileText, str]:
        title, sha, encoding, warning, skip_kind, skip_reason, text = reading
        if skip_kind is not None:
            raise NotText(_str(skip_reason), skip_kind)
        return FileText(_str(title), _str(text), encoding, None if warning is None else _str(warning)), sha


def open_store(enabled: bool, folder: Path | None) -> CorpusStore | None:
    """The corpus store in `folder` when `enabled` (settings `corpus_store`, `corpus_dir`); None when it is
    off or there is no folder to keep it in (no home directory)."""
    return CorpusStore(folder) if enabled and folder is not None else None
