"""A call's notes choice and its records: `NotesChoice` (the text and which notes it shows), `Picks` and
`PackedChoice` (the same by positions, small to keep on disk or send to another process), `Shown` (what an
answered call was shown, as the run folder records it), `NotesQuery` and `Selects` (choices made elsewhere),
and `Selections` (a stage's counts)."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .refs import Made, NoteRef


@dataclass(frozen=True, slots=True)
class NotesChoice:
    """The notes text for one call, and how it was chosen."""

    text: str
    shown: int
    indexed: int
    omitted: int = 0
    tokens: int = 0
    full: tuple[str, ...] = ()  # the keys of the notes shown in full, and of those shown as index lines
    listed: tuple[str, ...] = ()
    top: tuple[str, ...] = ()  # the keys of the notes that rank first, when asked for (`NotesSelector.select(top=k)`)
    picks: Picks | None = field(default=None, compare=False, repr=False)  # what `NotesSelector.filled` renders

    @property
    def selected(self) -> bool:
        """True when some notes were left out of the full text (the budget applied)."""
        return self.indexed + self.omitted > 0


def text_digest(text: str) -> str:
    """A short hash of a text: equal texts, equal digests."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Shown:
    """What one read was shown of the other notes, and why: all of them, a selection within the budget,
    or a smaller selection after the endpoint refused the call as too long for its window."""

    doc: str
    round: int
    why: str  # "every note", "selected", "refit"
    full: tuple[str, ...]
    listed: tuple[str, ...]
    omitted: int
    tokens: int
    digest: str  # a hash of the notes text the call was sent: their identities and texts, in order
    top: tuple[str, ...] = ()  # the notes that rank first for the read (`NotesSelector.select(top=k)`), when asked for

    @classmethod
    def of(cls, doc: str, round_no: int, choice: NotesChoice, text: str, *, refit: bool = False,
           top: tuple[str, ...] = ()) -> Shown:
        """What `doc`'s read in `round_no` was shown: `choice`, sent as `text` (in prefix order, it may be
        the same notes in another order); `refit` when it is a smaller choice after a refusal; `top`: the
        notes that rank first for it."""
        why = "refit" if refit else "selected" if choice.selected else "every note"
        return cls(doc, round_no, why, choice.full, choice.listed, choice.omitted, choice.tokens, text_digest(text),
                   top)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Shown:
        """A `Shown` as `to_dict` wrote it; the keys that are kept of it (its document's, and the `top` reuse.json
        names) interned, to share one string per document; those it showed, read and let go, as they are."""
        return cls(sys.intern(data["doc"]), data["round"], data["why"], tuple(data.get("full", ())),
                   tuple(data.get("listed", ())), data["omitted"], data["tokens"], data["digest"],
                   tuple(map(sys.intern, data.get("top", ()))))

    def to_dict(self) -> dict[str, Any]:
        out = {"doc": self.doc, "round": self.round, "why": self.why, "full": list(self.full),
               "listed": list(self.listed), "omitted": self.omitted, "tokens": self.tokens, "digest": self.digest}
        return {**out, "top": list(self.top)} if self.top else out


@dataclass(frozen=True, slots=True)
class Picks:
    """Which notes a choice shows in full and as index lines (positions, in the text's order), so that
    a choice can be kept without its text and rendered when its call goes out.

    The positions are one string of bytes (int32, those in full first): a round holds one a document
    until its calls go out, and two numpy arrays with their objects would take several times the room."""

    positions: bytes
    shown: int  # how many of `positions` are shown in full
    omitted: int
    every_but: int | None = None  # every note but this position's, in full (no budget applied)
    every: bool = False

    @classmethod
    def of(cls, full: Sequence[int], index: Sequence[int], omitted: int) -> Picks:
        return cls(packed_positions([*full, *index]), len(full), omitted)

    @property
    def full(self) -> np.ndarray:
        return np.frombuffer(self.positions, dtype=np.int32, count=self.shown)

    @property
    def index(self) -> np.ndarray:
        return np.frombuffer(self.positions, dtype=np.int32, offset=4 * self.shown)


@dataclass(frozen=True, slots=True)
class PackedChoice:
    """A compact choice by positions in its selector's `refs` (`NotesSelector.packed`): small to pickle
    (strings of bytes), for choices made in another process over the same notes (`Selects`)."""

    picks: Picks
    tokens: int
    top: bytes  # the positions (int32) of the notes that rank first, when asked for

    def first(self) -> list[int]:
        return np.frombuffer(self.top, dtype=np.int32).tolist()

    def to_bytes(self) -> bytes:
        """The choice as one string of bytes (`from_bytes` reads it): a head of six int32, the positions, the top."""
        p = self.picks
        head = np.array([p.shown, p.omitted, -1 if p.every_but is None else p.every_but, int(p.every), self.tokens,
                         len(p.positions) // 4], dtype=np.int32)
        return head.tobytes() + p.positions + self.top

    @classmethod
    def from_bytes(cls, data: bytes) -> PackedChoice:
        shown, omitted, every_but, every, tokens, count = np.frombuffer(data, dtype=np.int32, count=6).tolist()
        positions = data[24:24 + 4 * count]
        return cls(Picks(positions, shown, omitted, None if every_but < 0 else every_but, bool(every)), tokens,
                   data[24 + 4 * count:])


def packed_positions(positions: Sequence[int]) -> bytes:
    return np.asarray(positions, dtype=np.int32).tobytes()


@dataclass(frozen=True, slots=True)
class NotesQuery:
    """One read's selection to make: its query, the document whose note is left out, how many notes that
    rank first to name (`NotesSelector.select(query, exclude, top=top)`); with `best`, the notes that rank first
    for the query each in full within `best` tokens instead (`best_in_full`, as `packed_best` gives them)."""

    query: str
    exclude: str | None
    top: int = 0
    best: int | None = None


class Queries(Made[NotesQuery]):
    """The selections of `items` to make, each made by `make` when it is asked for (`Selects` takes them a batch
    at a time): a large stage's queries (the task and each document's own note) are not held at once."""


@runtime_checkable
class Selects(Protocol):
    """Makes many compact selections over one set of notes elsewhere (the workers of `--engine ray`): for
    each of `queries`, `NotesSelector(refs, budget).answer(query, budget)`, the same code on the same notes;
    the caller's own selector (`unpack`) turns them into the choices it would have made."""

    async def select_many(self, refs: Sequence[NoteRef], budget: int | None, queries: Sequence[NotesQuery],
                          each: Callable[[int, PackedChoice], None] | None = None) -> list[PackedChoice]:
        """The choices of `queries`, in their order; or, with `each`, `each(i, choice)` for the i-th query's as
        it comes back (in no particular order), and [] (a stage keeps them elsewhere, not all at once)."""
        ...



@dataclass(frozen=True, slots=True)
class Selections:
    """A stage's notes choices: how many, how many of them selected (the budget applied), and how many
    of its answered calls put the notes before the document."""

    calls: int = 0
    selected: int = 0
    shared_first: int = 0

    def __add__(self, other: Selections) -> Selections:
        return Selections(self.calls + other.calls, self.selected + other.selected,
                          self.shared_first + other.shared_first)
