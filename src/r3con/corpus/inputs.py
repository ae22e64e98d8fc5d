"""What became of every input of a run: read, skipped, unreadable, duplicate, excluded, degraded.

Loading the documents fills the first five; the pipeline adds the parts each document was split
into and the documents a stage had to go on without. Nothing given to r3con goes unaccounted.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, overload


class Part(Protocol):
    """A document or one of its parts, as the account counts them (`corpus.Document` is one)."""

    @property
    def number(self) -> int: ...
    @property
    def part(self) -> int: ...
    @property
    def source(self) -> str: ...


class Degrading(Protocol):
    """What a stage reports of a document it went on without (`results.Failure` is one)."""

    @property
    def doc(self) -> str: ...
    @property
    def stage(self) -> str: ...
    @property
    def error(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ReadInput:
    """A file read as document `doc`; `encoding` when it was not UTF-8, `warning` when not read as its kind."""

    doc: int
    source: str
    parts: int = 1
    encoding: str | None = None
    warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"doc": self.doc, "source": self.source, "parts": self.parts}
        if self.encoding:
            out["encoding"] = self.encoding
        if self.warning:
            out["warning"] = self.warning
        return out


class ReadInputs(Sequence[ReadInput]):
    """The files read, in order, as `ReadInput`s made when one is asked for: a number and a source a file, held in
    an array and a tuple (the source is the document's own string), their parts, encoding and warning only where
    there is one to say: a tuple of `ReadInput`s would be an object a file held for the whole run, for accounts
    read once or twice. Equal to any sequence of the same accounts; pickles as a tuple of them."""

    __slots__ = ("_docs", "_sources", "_parts", "_said")

    def __init__(self, docs: Iterable[int], sources: Iterable[str], parts: Mapping[int, int] | None = None,
                 said: Mapping[int, tuple[str | None, str | None]] | None = None):
        self._docs = array("q", docs)
        self._sources = tuple(sources)
        if len(self._sources) != len(self._docs):
            raise ValueError(f"{len(self._docs)} numbers for {len(self._sources)} sources")
        self._parts = {i: n for i, n in (parts or {}).items() if n != 1}  # at its place: a document split in more
        self._said = {i: (enc, warn) for i, (enc, warn) in (said or {}).items() if enc or warn}  # encoding, warning

    @classmethod
    def of(cls, accounts: Iterable[ReadInput]) -> ReadInputs:
        accounts = tuple(accounts)
        return cls((r.doc for r in accounts), (r.source for r in accounts),
                   {i: r.parts for i, r in enumerate(accounts)}, {i: (r.encoding, r.warning) for i, r in enumerate(accounts)})

    def with_parts(self, counts: Mapping[int, int]) -> ReadInputs:
        """The same accounts, each document's parts as `counts` has them by its number (those it lacks as they were)."""
        out = ReadInputs.__new__(ReadInputs)
        out._docs, out._sources, out._said = self._docs, self._sources, self._said
        out._parts = {i: n for i, doc in enumerate(self._docs) if (n := counts.get(doc, self._parts.get(i, 1))) != 1}
        return out

    def __len__(self) -> int:
        return len(self._docs)

    @overload
    def __getitem__(self, index: int) -> ReadInput: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[ReadInput, ...]: ...
    def __getitem__(self, index: int | slice) -> ReadInput | tuple[ReadInput, ...]:
        if isinstance(index, slice):
            return tuple(self._made(i) for i in range(len(self))[index])
        return self._made(range(len(self))[index])  # a negative index counted from the end, IndexError past it

    def __iter__(self) -> Iterator[ReadInput]:
        return (self._made(i) for i in range(len(self)))

    def _made(self, i: int) -> ReadInput:
        encoding, warning = self._said.get(i, (None, None))
        return ReadInput(self._docs[i], self._sources[i], self._parts.get(i, 1), encoding, warning)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes | bytearray):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))  # as the tuple of the same accounts hashes

    def __repr__(self) -> str:
        return f"ReadInputs({len(self):,} files)"

    def __reduce__(self) -> tuple[type[tuple[Any, ...]], tuple[tuple[ReadInput, ...]]]:
        return tuple, (tuple(self),)  # pickled (to another process, a copy) as the accounts themselves


@dataclass(frozen=True, slots=True)
class SkippedInput:
    """A file that holds no text r3con can use; `kind` groups the reasons (unsupported, empty, binary, no text layer)."""

    source: str
    reason: str
    kind: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "reason": self.reason, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class UnreadableInput:
    """A file that could not be read (permissions, a broken PDF); `reason` says what to do."""

    source: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class DuplicateInput:
    """A file whose text is identical to an earlier one's: read once, as `same_as`."""

    source: str
    same_as: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "same_as": self.same_as}


@dataclass(frozen=True, slots=True)
class ExcludedInput:
    """A file or folder a folder walk left out, and the rule that did (hidden, version control, --exclude GLOB...)."""

    source: str
    rule: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "rule": self.rule}


@dataclass(frozen=True, slots=True)
class DegradedInput:
    """A document (or part) a stage went on without, and why."""

    doc: str
    stage: str
    cause: str

    def to_dict(self) -> dict[str, str]:
        return {"doc": self.doc, "stage": self.stage, "cause": self.cause}


@dataclass(frozen=True)
class Inputs:
    """The account of every input of a run (manifest.json and `--json` carry it as `inputs`)."""

    read: Sequence[ReadInput] = ()  # a `ReadInputs` as loading and `of` make it
    skipped: tuple[SkippedInput, ...] = ()
    unreadable: tuple[UnreadableInput, ...] = ()
    duplicates: tuple[DuplicateInput, ...] = ()
    excluded: tuple[ExcludedInput, ...] = ()
    degraded: tuple[DegradedInput, ...] = ()

    @classmethod
    def of(cls, documents: Iterable[Part]) -> Inputs:
        """The account of documents given in memory (every one read)."""
        firsts = [d for d in documents if d.part == 1]
        return cls(read=ReadInputs((d.number for d in firsts), (d.source for d in firsts)))

    def with_parts(self, parts: Sequence[Part]) -> Inputs:
        """The same account, with how many parts each read document was split into."""
        counts = Counter(p.number for p in parts)
        read = self.read if isinstance(self.read, ReadInputs) else ReadInputs.of(self.read)
        return replace(self, read=read.with_parts(counts))

    def with_degraded(self, failures: Iterable[Degrading]) -> Inputs:
        """The same account, with the documents the stages had to go on without."""
        seen = {(d.doc, d.stage) for d in self.degraded}
        added: list[DegradedInput] = []
        for f in failures:  # a part that failed in several rounds of a stage is listed once
            if (f.doc, f.stage) not in seen:
                seen.add((f.doc, f.stage))
                added.append(DegradedInput(doc=f.doc, stage=f.stage, cause=f.error))
        return replace(self, degraded=self.degraded + tuple(added))

    @property
    def issues(self) -> tuple[tuple[str, str], ...]:
        """(what, why) for every input not fully used: the ones a user must hear about (and `--strict` fails on)."""
        return (
            *((u.source, u.reason) for u in self.unreadable),
            *((s.source, s.reason) for s in self.skipped),
            *((r.source, r.warning) for r in self.read if r.warning),
            *((f"document {d.doc}", f"degraded in {d.stage}: {d.cause}") for d in self.degraded),
        )

    def to_dict(self, *, lazy: bool = False) -> dict[str, Any]:
        """The account as JSON; `lazy`: the documents read as an iterator of their entries, each made as it is
        written (`RunDir.write_json`: 100,000 entries are not all made at once)."""
        return {
            "read": (r.to_dict() for r in self.read) if lazy else [r.to_dict() for r in self.read],
            "skipped": [s.to_dict() for s in self.skipped],
            "unreadable": [u.to_dict() for u in self.unreadable],
            "degraded": [d.to_dict() for d in self.degraded],
            "duplicates": [d.to_dict() for d in self.duplicates],
            "excluded": [e.to_dict() for e in self.excluded],
        }
