"""The run folder: everything a run did, written as it happens, so a run can be inspected and resumed.

    manifest.json         task, documents (titles, sizes, parts, content hashes), settings, endpoint,
                          versions, and the attempts made in this folder
    notes/round-N.json    each round's note per document
    schema.json           the accepted schema; schema_attempts.json every proposal and its problem
    documents.jsonl       each document's text as loaded (the spans of records' passages index it)
    records.json          all records with their source documents and checked passages; records/TABLE.csv one file a table
    dropped_records.json  records left out because their passage is not in their document (--unverified drop)
    transcript.json       the agent's steps: reply, code, output, errors
    calls.jsonl           every LLM call: stage, document, usage, latency, reply (requests: `--log-calls`)
    usage.json            usage and cost, in total and per stage
    result.json           the answer, its evidence, degraded documents, usage (what `r3con run --json` prints)
    error.json            written when the run failed or was interrupted: stage, kind, message (a bug's traceback)
    report.html           the run to look at in a browser, written last (a failed run's too): r3con.report

The folder holds the user's documents and what the model said about them: it is private (0700, its
files 0600), and every file is written whole (a temporary file, then a rename).
"""

from __future__ import annotations

import csv
import errno
import fcntl
import io
import itertools
import json
import os
import re
import secrets
import shutil
import sqlite3
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DiskFull, InputError, R3conError
from ..files import PRIVATE_DIR, make_private, write_atomic
from .jsonstream import json_pieces, listlike


def _slug(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "run"


def lock_holder(st: os.stat_result) -> int | None:
    """The process holding a flock on the file `st` describes, from Linux's /proc/locks; None where unknown."""
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if "->" not in fields and "FLOCK" in fields and wanted in fields:
            return int(fields[fields.index(wanted) - 1])
    return None


class RunDir:
    """A run's folder; every write is atomic (temp file, then rename) and private."""

    def __init__(self, path: Path):
        self.path = path
        self._lock: weakref.finalize | None = None  # closes the lock's descriptor, releasing it

    @classmethod
    def allocate(cls, out_dir: Path, task: str) -> RunDir:
        """A new run folder's name under `out_dir`, not yet created (`open()` creates it when the run starts)."""
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        return cls(Path(out_dir) / f"{stamp}-{_slug(task)}-{secrets.token_hex(2)}")

    @classmethod
    def create(cls, out_dir: Path, task: str) -> RunDir:
        """A new run folder under `out_dir`, created now."""
        return cls.allocate(out_dir, task).open()

    def open(self, *, new: bool = True) -> RunDir:
        """Create the folder (private); `new`: it must not exist yet."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.mkdir(mode=PRIVATE_DIR, exist_ok=not new)
            os.chmod(self.path, PRIVATE_DIR)
        except OSError as exc:
            raise InputError(f"cannot create run folder {self.path}: {exc.strerror or exc}; "
                             "pass a writable --out") from exc
        self.lock()
        return self

    def lock(self) -> None:
        """Hold the folder's lock (flock on the folder itself: no file is added) until `unlock`, so that no other
        run or resume writes it at the same time; ConfigError (exit 2) naming the process that holds it."""
        if self._lock is not None and self._lock.alive:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return  # no folder yet: `open()` locks it when it makes it
        except OSError as exc:
            raise InputError(f"cannot lock run folder {self.path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_holder(os.fstat(fd))
            os.close(fd)
            raise ConfigError(f"the run folder {self.path} is in use by process {holder or '(unknown)'} (another "
                              "r3con run or --resume of it); wait for it to end, or stop it, then --resume again") from None
        self._lock = weakref.finalize(self, os.close, fd)

    def unlock(self) -> None:
        """Let go of the folder's lock (`lock`)."""
        if self._lock is not None:
            self._lock()
            self._lock = None

    def discard_if_unused(self) -> bool:
        """Remove the folder if no LLM call was made in it (a start that failed); True if removed."""
        if self.calls_path.exists() or not self.path.is_dir():
            return False
        shutil.rmtree(self.path, ignore_errors=True)
        return True

    def seal(self) -> None:
        """Make every file in the folder private, including what other writers (the sandbox) left there."""
        if self.path.is_dir():
            make_private(self.path)

    def manifest(self) -> dict[str, Any]:
        """The folder's manifest.json as an earlier attempt left it ({} when there is none or it is unreadable)."""
        try:
            data = json.loads((self.path / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def calls_path(self) -> Path:
        return self.path / "calls.jsonl"

    @property
    def ray_log_path(self) -> Path:
        """`--engine ray`: Ray's own messages to the driver (a worker that died, a task retried)."""
        return self.path / "ray.log"

    @property
    def scratch_root(self) -> Path:
        return self.path / "sandbox"

    def _folder(self, target: Path) -> None:
        if not target.parent.is_dir():
            target.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)

    def write_json(self, name: str, data: Any) -> Path:
        """`data` as JSON, indented for reading; beyond 200,000 characters on one line (indenting goes through
        Python's slow encoder: seconds for a large corpus's manifest). A list or a mapping of more than 5,000
        items, or a mapping that holds one (a large corpus's manifest, a round's notes, reuse.json), is
        written on one line, a piece at a time: the same text, never held whole (a large corpus's entries
        would be held again as one Python string, several times their JSON). `data`, or a value of it, may be
        an iterator of a list's items, or a `Later`, made as it is written."""
        data = _made(data)
        if isinstance(data, Mapping) and all(isinstance(k, str) for k in data):
            data = {k: _made(v) for k, v in data.items()}
            if any(_long(v) for v in data.values()):
                return self.write_text(name, itertools.chain(json_text(data), ["\n"]))
        elif _long(data):
            return self.write_text(name, itertools.chain(json_text(data), ["\n"]))
        text = json.dumps(data, ensure_ascii=False, default=_default)
        if len(text) <= _INDENT_UP_TO:
            text = json.dumps(data, ensure_ascii=False, indent=1, default=_default)
        return self.write_text(name, text + "\n")

    def write_json_rows(self, name: str, tables: Mapping[str, Sequence[Any]]) -> Path:
        """`tables` ({name: [row, ...]}) as JSON with each row on a line of its own, written a row at a time:
        any JSON parser reads it as `write_json`'s, and `json_rows` reads it a row at a time (a large
        run's records need not be held as one string, nor parsed whole by the report)."""
        def pieces() -> Iterator[str]:
            yield "{\n"
            for n, (table, rows) in enumerate(tables.items()):
                yield ("" if n == 0 else ",\n") + json.dumps(str(table), ensure_ascii=False) + ": [\n"
                for i, row in enumerate(rows):
                    yield ("" if i == 0 else ",\n") + json.dumps(row, ensure_ascii=False, default=str)
                yield "\n]"
            yield "\n}\n"
        return self.write_text(name, pieces())

    def write_text(self, name: str, text: str | Iterable[str]) -> Path:
        target = self.path / name
        self._folder(target)
        return write_atomic(target, text)

    def write_table_csv(self, table: str, rows: Sequence[Mapping[str, Any]]) -> Path:
        """records/TABLE.csv: a column a field (in the order first seen), a row a record, lists and objects as
        JSON; the rows are read twice (the fields, then the lines), never copied."""
        fields: dict[str, None] = {}
        for row in rows:
            fields.update(dict.fromkeys(row))

        def chunks(size: int = 1000) -> Iterator[str]:  # a large run's table is not built as one string
            buffer = io.StringIO(newline="")
            writer = csv.DictWriter(buffer, fieldnames=list(fields))
            writer.writeheader()
            for n, row in enumerate(rows, start=1):
                writer.writerow({k: json.dumps(v, ensure_ascii=False) if isinstance(v, dict | list) else v
                                 for k, v in row.items()})
                if n % size == 0:
                    yield buffer.getvalue()
                    buffer.seek(0)
                    buffer.truncate()
            yield buffer.getvalue()

        target = self.path / "records" / f"{_slug(table, 80)}.csv"
        self._folder(target)
        return write_atomic(target, chunks(), newline="")


_INDENT_UP_TO = 200_000  # characters of JSON a run folder's file is indented up to
_STREAM_ITEMS = 5_000  # a list this long in a mapping: `write_json` writes the mapping a piece at a time


class Later:
    """A value of a run folder's JSON file made when the file is written (`make`: any JSON value, or an
    iterator of a list's items, written an item at a time) rather than held: the manifest's entries per
    document, held, would stay for the whole run to be written once at its end."""

    def __init__(self, make: Callable[[], Any]):
        self.make = make


def _made(value: Any) -> Any:
    """What a `Later` makes (else `value`), and an iterator (made or given) as a list when it is short."""
    if isinstance(value, Later):
        value = value.make()
    if not isinstance(value, Iterator):
        return value
    head = list(itertools.islice(value, _STREAM_ITEMS + 1))
    return head if len(head) <= _STREAM_ITEMS else itertools.chain(head, value)


def _long(value: Any) -> bool:
    """Written a piece at a time: an iterator (of many items), a list or mapping of many, or a mapping that holds
    one (a run's summary: its inputs' account holds the documents read, made as they are written)."""
    if isinstance(value, Iterator):
        return True
    if (listlike(value) or isinstance(value, Mapping)) and len(value) > _STREAM_ITEMS:
        return True
    return isinstance(value, Mapping) and any(_long(v) for v in value.values())


def _default(value: Any) -> Any:
    """What `write_json` writes for a value JSON has no type for: what a `Later` makes, a mapping's dict,
    else its str."""
    if isinstance(value, Mapping):
        return dict(value)
    if listlike(value):  # a short sequence that is not a list: as a list
        return list(value)
    if not isinstance(value, Later):
        return str(value)
    made = value.make()
    return list(made) if isinstance(made, Iterator) else made


def json_text(value: Any) -> Iterator[str]:
    """`json.dumps(value, ensure_ascii=False, default=_default)` a piece at a time: the mapping at the top
    a member at a time, and within it the long lists, iterators and mappings (`_long`) an item at a time
    (what `write_json` writes on one line; `r3con run --json` prints a run's summary so)."""
    return json_pieces(value, lambda value, top: top or _long(value), default=_default, made=_made)



_FULL = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` (or what it was raised from) says the disk or the quota is full."""
    link: BaseException | None = exc
    for _ in range(8):
        if link is None:
            return False
        if isinstance(link, OSError) and link.errno in _FULL:
            return True
        if isinstance(link, sqlite3.OperationalError) and "disk is full" in str(link):
            return True
        link = link.__cause__ or link.__context__
    return False


def disk_full(folder: Path, exc: BaseException, stage: str | None = None) -> DiskFull:
    """The error a full disk becomes: where r3con was writing, in the run folder `folder` during `stage`
    (the CLI adds how to resume)."""
    link = exc.__cause__ if isinstance(exc, R3conError) and exc.__cause__ is not None else exc
    where = getattr(link, "filename", None) or (
        "the LLM cache" if isinstance(link, sqlite3.Error) else f"the run folder {folder}")
    return DiskFull(f"no space left on the device while writing {where}; free some space", run_dir=folder,
                    stage=stage)


class NotRows(ValueError):
    """A file `json_rows` cannot read a row at a time: not in `RunDir.write_json_rows`'s layout."""


def json_rows(lines: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """(table, row) of a file `RunDir.write_json_rows` wrote, read a line at a time, with (table, None) as
    each table starts (so that an empty one is seen); NotRows (a ValueError) where the lines are not in
    that layout (another writer's JSON: parse it whole instead)."""
    it = iter(lines)
    if next(it, "").strip() != "{":
        raise NotRows("not a rows file")
    table: str | None = None
    for line in it:
        text = line.strip()
        if not text:
            continue
        if table is None:
            if text == "}":
                return
            if not text.endswith(": ["):
                raise NotRows(f"not a table's start: {text[:40]!r}")
            table = str(_line_json(text[:-3]))
            yield table, None
        elif text in ("]", "],"):
            table = None
        else:
            yield table, _line_json(text[:-1] if text.endswith(",") else text)
    raise NotRows("the file ends inside it")


def _line_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:  # an indented file, say: a row spread over lines
        raise NotRows(f"not a row: {text[:40]!r}") from exc
