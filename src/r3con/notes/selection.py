"""The notes: what each document's relevance read wrote, and what every later call is shown of them.

One module owns them: the notes of a round (`round_entries`, with the documents each names), the
selection each call is shown (`NotesSelector`, recorded as a `Shown`), their formatting, fitting a call
to the window (`fitting`), and the references between notes. The relevance stage asks it for each
read's notes, population and the answer for the final notes (`FinalNotes`: for population, when they do
not all fit, the task's first notes and each document's own), the run folder keeps its records
(notes/round-N.json, notes/shown-N.jsonl, notes/shown-populate.jsonl) and the report reads them.

When the other documents' notes exceed a token budget, the most relevant go in full and the rest become
a compact index (document number, title, first words), so the model still knows they exist. Both are in
corpus order, and the index does not count the notes it leaves out: a call's notes text changes only
when what it is shown changes, so a later run over a grown corpus (`reuse`) can find it unchanged. Ranking is
BM25 over the notes, with the task (and, in the relevance rounds, the document's own previous note) as
the query, or embeddings when an embeddings endpoint is configured. When everything fits, the text is
exactly what the paper's method shows: `format_notes` of all the notes.

One `NotesSelector` is built per set of notes (a relevance round, or the final notes) and answers
each call's `select(query, exclude)`, so the index and the per-note sizes are computed once.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys
from array import array
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, overload, runtime_checkable

import numpy as np

from ..corpus.documents import Document
from ..corpus.places import Parts
from ..errors import ContextTooLong
from ..evidence.citations import document_refs
from ..prompts.render import attribute
from ..tokens import CJK_CHAR, estimate_tokens
from .keyed import KeyedBytes, SpooledNotes
from .retrieval import BM25, unit_rows

T = TypeVar("T")
R = TypeVar("R")
INDEX_WORDS = 12
QUERY_WORDS = 100  # words of a document without a note that rank the final notes for its population call
_INDEX_OVERHEAD = 60  # tokens of the notes index's header and tags
_WORD = re.compile(r"[^\W\d_][^\W_]*|\d+", re.UNICODE)
_STOP = frozenset(
    "a an the and or of to in on at for by with from as is are was were be been it its this that these those "
    "which who what when where how not no he she his her they them their we you i".split()
)

Embed = Callable[[Sequence[str]], Awaitable[list[list[float]]]]


@dataclass(frozen=True, slots=True)
class NoteRef:
    """A note as it appears in a prompt: labelled with its document number and title."""

    label: str
    title: str
    text: str


def note_refs(docs: Sequence[Document], notes: Mapping[str, str], exclude: str | None = None) -> list[NoteRef]:
    """Non-empty notes of `docs` in corpus order, without the note of `exclude` (a document key)."""
    refs = []
    for doc in docs:
        text = notes.get(doc.key, "")
        if doc.key != exclude and text:
            refs.append(NoteRef(label=doc.key, title=doc.title, text=text))
    return refs


class Made(Sequence[R]):
    """`items`, each made into what `make` makes of it when it is asked for, never all of them at once."""

    def __init__(self, items: Sequence[Any], make: Callable[[Any], R]):
        self._items, self._make = items, make

    @overload
    def __getitem__(self, at: int) -> R: ...
    @overload
    def __getitem__(self, at: slice) -> list[R]: ...
    def __getitem__(self, at: int | slice) -> R | list[R]:
        if isinstance(at, slice):
            return [self._make(item) for item in self._items[at]]
        return self._make(self._items[at])

    def __len__(self) -> int:
        return len(self._items)


class NoteRefs(Made[NoteRef]):
    """`note_refs(docs, notes)` made a note at a time, when one is asked for: what a selector keeps of a large
    round's or the final notes, which a `SpooledNotes` holds on disk. Held: 4 B a note (its document's
    position in `docs`); the final notes as `NoteRef`s with their texts were 260 B a note on the driver through
    population and the answer (D = 5,000, bench_engine heap)."""

    RECENT = 2_048  # notes kept as read, the most recently asked for: the best-ranked notes are in most choices

    def __init__(self, docs: Sequence[Document], notes: Mapping[str, str], at: array[int] | None = None):
        self._docs, self._notes = docs, notes
        self._at = at if at is not None else array("i", (i for i, d in enumerate(docs) if has_note(notes, d.key)))
        self._recent: OrderedDict[int, NoteRef] = OrderedDict()
        super().__init__(self._at, self._ref)

    def labels(self) -> Iterator[str]:
        """Each note's document key, in order, without reading its text."""
        return (self._docs[at].key for at in self._at)

    def label(self, i: int) -> str:
        """The document key of note `i`, without reading its text (what a call was shown is recorded by key: reading
        each note back for it doubled the notes read a call, +2.3 ms of CPU a call at D = 2,000)."""
        return self._docs[self._at[i]].key

    def places(self) -> Mapping[str, int] | None:
        """Each note's position by its document key when that is the run's parts' places (a note for every part
        of a `Parts`): the run's one dict of them, not another; else None."""
        docs = self._docs
        return docs.places if isinstance(docs, Parts) and len(self._at) == len(docs) else None

    def without(self, positions: Iterable[int]) -> NoteRefs:
        """These notes but those at `positions`."""
        left = set(positions)
        return NoteRefs(self._docs, self._notes, array("i", (at for i, at in enumerate(self._at) if i not in left)))

    def _ref(self, at: int) -> NoteRef:
        """Note `at` (a position in `docs`), from the `RECENT` notes last read, else read back: each choice shows a
        hundred notes or so in full and as index lines, and reading every one back took 1.5 ms of CPU a call
        (D = 2,000, bench_engine); the recent ones hold a few MB whatever the corpus."""
        recent = self._recent
        ref = recent.get(at)
        if ref is not None:
            recent.move_to_end(at)
            return ref
        doc = self._docs[at]
        key = doc.key
        ref = recent[at] = NoteRef(label=key, title=doc.title, text=self._notes[key])
        if len(recent) > self.RECENT:
            recent.popitem(last=False)
        return ref

    def __reduce__(self) -> tuple[type[tuple[NoteRef, ...]], tuple[tuple[NoteRef, ...]]]:
        return tuple, (tuple(self),)  # pickled (to another process, a copy) as the notes themselves


def has_note(notes: Mapping[str, str], key: str) -> bool:
    """Whether `notes` holds a note for document `key` that is not empty (a `SpooledNotes` answers without
    reading it back)."""
    return notes.has_note(key) if isinstance(notes, SpooledNotes) else bool(notes.get(key))


def _label(refs: Sequence[NoteRef]) -> Callable[[int], str]:
    """The label of `refs[i]`, as a function of i (a `NoteRefs` reads no note for it)."""
    return refs.label if isinstance(refs, NoteRefs) else lambda i: refs[i].label


def _labels(refs: Sequence[NoteRef]) -> Iterator[str]:
    return map(_label(refs), range(len(refs)))


def format_notes(refs: Sequence[NoteRef]) -> str:
    """Notes as a prompt shows them in full: each labelled with its document number and title. (Formatted
    here, not by a template: most calls of a large run format notes and an index, and rendering a
    template took four times as long.)"""
    if not refs:
        return "<notes>\n(no document was found relevant)\n</notes>"
    return "<notes>\n" + "".join(f'<note document="{r.label}" title="{attribute(r.title)}">\n{r.text}\n</note>\n'
                                  for r in refs) + "</notes>"


_INDEX_HEAD = ("<notes_index>\nNotes on these other documents are not shown in full, to fit the context window; they "
               "were ranked less relevant to the task. Each line gives the document, its title and how its note begins.\n")


def format_index(lines: Sequence[_IndexLine], omitted: int) -> str:
    """The index of the notes not shown in full: a line each (document, title, how the note begins), and
    whether more were left out."""
    return (_INDEX_HEAD + "".join(f'Document {x.label} "{attribute(x.title)}": {x.start}\n' for x in lines)
            + ("... and more documents with notes, not listed.\n" if omitted else "") + "</notes_index>")


def round_entries(parts: Sequence[Document], notes: Mapping[str, str]) -> Iterator[dict[str, Any]]:
    """A round's notes for its record (notes/round-N.json), one at a time: each with `refs`, the keys of the
    documents it names ("document 12"), for links and for knowing which notes name a document that left."""
    keys = {p.key for p in parts}
    return ({"doc": p.key, "title": p.title, "note": notes[p.key],
             "refs": document_refs(notes[p.key], keys, own=p.key)} for p in parts if p.key in notes)


def terms(text: str) -> list[str]:
    """Lower-cased words without stop words; CJK runs become characters and character bigrams."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if CJK_CHAR.search(word):
            chars = [c for c in word if not c.isspace()]
            out.extend(chars)
            out.extend(a + b for a, b in zip(chars, chars[1:], strict=False))
        elif word not in _STOP and len(word) > 1:
            out.append(word)
    return out


def notes_bm25(texts: Iterable[str]) -> BM25:
    """The BM25 index notes are ranked with: `terms` (stop words out, CJK bigrams), k1 = 1.2, each query
    term counted once."""
    return BM25(texts, k1=1.2, tokenize=terms, distinct_query_terms=True)


def prefix_order(count: int, own: int | None) -> list[int]:
    """Positions 0..count-1 without `own`, ordered so that calls for nearby documents share long prefixes.

    Halve the range: the half without `own` comes first, in corpus order, then the same within the
    half that holds it, down to `own`. Two documents' orders agree up to the level where their
    halves part, so a prefix cache holds all but a few of the notes for each call after the first,
    where corpus order (which every call breaks at its own position) shares half of them on average.
    """
    if own is None:
        return list(range(count))
    out: list[int] = []
    lo, hi = 0, count
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if own < mid:
            out.extend(range(mid, hi))
            hi = mid
        else:
            out.extend(range(lo, mid))
            lo = mid
    return out


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
    picks: _Picks | None = field(default=None, compare=False, repr=False)  # what `NotesSelector.filled` renders

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
        """A `Shown` as `to_dict` wrote it; its keys interned (what is kept of it, such as the `top` reuse.json
        names, shares one string per document)."""
        def keys(name: str) -> tuple[str, ...]:
            return tuple(map(sys.intern, data.get(name, ())))

        return cls(sys.intern(data["doc"]), data["round"], data["why"], keys("full"), keys("listed"), data["omitted"],
                   data["tokens"], data["digest"], keys("top"))

    def to_dict(self) -> dict[str, Any]:
        out = {"doc": self.doc, "round": self.round, "why": self.why, "full": list(self.full),
               "listed": list(self.listed), "omitted": self.omitted, "tokens": self.tokens, "digest": self.digest}
        return {**out, "top": list(self.top)} if self.top else out


@dataclass(frozen=True, slots=True)
class _Picks:
    """Which notes a choice shows in full and as index lines (positions, in the text's order), so that
    a choice can be kept without its text and rendered when its call goes out.

    The positions are one string of bytes (int32, those in full first): a round holds one a document
    until its calls go out, and two numpy arrays with their objects took three times the room."""

    positions: bytes
    shown: int  # how many of `positions` are shown in full
    omitted: int
    every_but: int | None = None  # every note but this position's, in full (no budget applied)
    every: bool = False

    @classmethod
    def of(cls, full: Sequence[int], index: Sequence[int], omitted: int) -> _Picks:
        return cls(_packed([*full, *index]), len(full), omitted)

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

    picks: _Picks
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
        return cls(_Picks(positions, shown, omitted, None if every_but < 0 else every_but, bool(every)), tokens,
                   data[24 + 4 * count:])


def _packed(positions: Sequence[int]) -> bytes:
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
    at a time): at D = 100,000 a stage's queries (the task and each document's own note) held at once were 30 MB."""


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
class _IndexLine:
    label: str
    title: str
    start: str


def _index_line(ref: NoteRef) -> _IndexLine:
    words = ref.text.split()
    start = " ".join(words[:INDEX_WORDS]) + (" ..." if len(words) > INDEX_WORDS else "")
    return _IndexLine(ref.label, ref.title, start)


def _line_tokens(line: _IndexLine) -> int:
    return estimate_tokens(f'Document {line.label} "{line.title}": {line.start}')


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


class NotesSelector:
    """Chooses, per call, which notes go in full and which as index lines, within `budget` tokens.

    `budget` None or 0 means no budget: every note in full, as the paper does.
    """

    def __init__(self, refs: Sequence[NoteRef], budget: int | None, *, embed: Embed | None = None):
        self.refs: Sequence[NoteRef] = refs if isinstance(refs, NoteRefs) else tuple(refs)  # NoteRefs: made when read
        self.budget = budget or None
        self._embed = embed
        self._at: Mapping[str, int] | None = None  # a note's position by its document key (`_position`)
        # each note's tokens in full (less the <notes> tags) and as an index line (`_index`, on first use): 8 B a
        # note each; the index lines themselves are made again for the few a choice shows (`_render`)
        self._full_cost = array("q", (estimate_tokens(format_notes([r])) - 3 for r in self.refs))
        self._total = sum(self._full_cost) + 4
        self._line_cost: array[int] | None = None
        self._line_total = 0
        self._cost_arrays: dict[str, np.ndarray] = {}
        self._bm25: BM25 | None = None
        self._vectors: np.ndarray | None = None

    @property
    def ranking(self) -> str:
        return "embeddings" if self._embed is not None else "bm25"

    @property
    def embed(self) -> Embed | None:
        return self._embed

    def full_cost(self, position: int) -> int:
        """Estimated tokens of the note at `position` in full (less the <notes> tags)."""
        return self._full_cost[position]

    async def best_in_full(self, query: str, budget: int) -> list[int]:
        """The positions (ascending) of the notes that rank first for `query`, each taken in full while it
        fits what is left of `budget`, as `select` takes them."""
        if budget <= 0 or not self.refs:
            return []
        shown, _ = _Ranked(await self._scores(query), None).pick(self._costs("full"), budget)
        return sorted(shown)

    def shared_text(self, exclude: str | None = None) -> str:
        """Every note but that of `exclude`, in `prefix_order`: for calls that put the notes first."""
        pos = self._position(exclude)
        return format_notes([self.refs[i] for i in prefix_order(len(self.refs), pos)])

    def full_tokens(self, exclude: str | None = None) -> int:
        """Estimated tokens of all notes in full (less the note of `exclude`)."""
        pos = self._position(exclude)
        return self._total - (self._full_cost[pos] if pos is not None else 0)

    async def select(self, query: str, exclude: str | None = None, budget: int | None = None, *,
                     compact: bool = False, top: int = 0) -> NotesChoice:
        """The notes text for a call whose query is `query`, without the note of `exclude` (a document key).

        `budget` overrides the selector's budget for this call (after a request did not fit the window).
        `compact`: the choice without its text and keys, as `compact` gives it (a plan of many calls; `filled`).
        `top`: the choice names the `top` notes that rank first (`NotesChoice.top`), from the same scores.
        """
        budget = self.budget if budget is None else budget  # an explicit 0 leaves every note out
        choice = await self._choose(query, exclude, budget, render=not compact, top=top)
        return self.compact(choice) if compact else choice

    async def packed_best(self, query: str, budget: int) -> PackedChoice:
        """`best_in_full(query, budget)` as it travels between processes: its positions as the notes in full."""
        shown = await self.best_in_full(query, budget)
        return PackedChoice(_Picks.of(shown, [], 0), sum(self._full_cost[i] for i in shown) + 4 if shown else 0, b"")

    async def answer(self, query: NotesQuery, budget: int | None) -> PackedChoice:
        """`query`'s choice (`Selects`) with the selector's notes and `budget`."""
        if query.best is not None:
            return await self.packed_best(query.query, query.best)
        return await self.packed(query.query, query.exclude, budget, top=query.top)

    async def packed(self, query: str, exclude: str | None = None, budget: int | None = None, *,
                     top: int = 0) -> PackedChoice:
        """`select(query, exclude, budget, compact=True, top=top)` as it travels between processes: positions
        in `refs`, not labels; a selector over the same refs makes the choice of it (`unpack`)."""
        return await self._pick(query, exclude, self.budget if budget is None else budget, top)

    def unpack(self, packed: PackedChoice) -> NotesChoice:
        """The compact choice `packed` stands for, as `select(..., compact=True)` makes it here."""
        return self._choice(packed, render=False)

    async def _choose(self, query: str, exclude: str | None, budget: int | None, *,
                      render: bool = True, top: int = 0) -> NotesChoice:
        return self._choice(await self._pick(query, exclude, budget, top), render=render)

    def _choice(self, packed: PackedChoice, *, render: bool) -> NotesChoice:
        """The choice `packed` stands for: with its text and keys when `render`, else by positions alone (`compact`)."""
        picks, refs = packed.picks, self.refs
        shown = len(refs) - (picks.every_but is not None) if picks.every else len(picks.full)
        full, listed = self.keys_of(picks) if render else ((), ())
        return NotesChoice(self._render(picks) if render else "", shown=shown, indexed=len(picks.index),
                           omitted=picks.omitted, tokens=packed.tokens, full=full, listed=listed, picks=picks,
                           top=tuple(map(_label(refs), packed.first())))

    async def _pick(self, query: str, exclude: str | None, budget: int | None, top: int) -> PackedChoice:
        # No step sorts or scans every note in Python: `_Ranked` reads the ranking only as far as the
        # budget lasts; the choice is the same as ranking every note and scanning all of them.
        pos = self._position(exclude)
        count = len(self.refs) - (pos is not None)
        full = self.full_tokens(exclude)
        scores = await self._scores(query) if top > 0 and count else None
        first = self._first(scores, pos, top) if scores is not None else b""
        if not count or budget is None or full <= budget:
            return PackedChoice(_Picks(b"", 0, 0, every_but=pos, every=True), full, first)
        scores = await self._scores(query) if scores is None else scores
        line_cost = self._index()
        index_cost = _INDEX_OVERHEAD + self._line_total - (line_cost[pos] if pos is not None else 0)
        remaining = budget - index_cost
        ranked = _Ranked(scores, pos)
        if index_cost <= budget // 2:  # every other note at least as an index line; upgrade the best ranked
            shown, _ = ranked.pick(self._costs("extra"), remaining)
            taken = set(shown)
            indexed = [i for i in range(len(self.refs)) if i != pos and i not in taken]
        else:  # the index alone would crowd out the notes: half for the best in full, half for index lines
            shown, left = ranked.pick(self._costs("full"), budget // 2)
            indexed, _ = ranked.pick(self._costs("line"), left + budget - budget // 2 - _INDEX_OVERHEAD, taken=shown)
        indexed.sort()  # the index lines in corpus order, as the notes in full
        omitted = count - len(shown) - len(indexed)
        tokens = sum(self._full_cost[i] for i in shown) + 4  # the costs already counted, not the text again
        if indexed or omitted:
            tokens += _INDEX_OVERHEAD + sum(line_cost[i] for i in indexed)
        return PackedChoice(_Picks.of(sorted(shown), indexed, omitted), tokens, first)

    def _first(self, scores: np.ndarray, pos: int | None, k: int) -> bytes:
        """The positions of the `k` notes that rank first by `scores` (without position `pos`), by the ranking
        the selection uses, whether or not every note fits: descending score, ties in corpus order; with BM25,
        only notes that share a term with the query."""
        best = _best(scores, None, min(len(scores), k + 1)).tolist()
        return _packed([i for i in best if i != pos and (self._embed is not None or scores[i] > 0)][:k])

    def compact(self, choice: NotesChoice) -> NotesChoice:
        """`choice` kept small while a round's other calls are planned: its positions (`picks`) alone, without
        its text and the keys it shows (at D = 100,000, a planned read's keys held 1.5 KB); `filled` restores them."""
        return replace(choice, text="", full=(), listed=()) if choice.picks is not None else choice

    def filled(self, choice: NotesChoice) -> NotesChoice:
        """`choice` with its text and keys, rendered again from its positions when `compact` left them out."""
        if choice.text or choice.picks is None:
            return choice
        full, listed = self.keys_of(choice.picks)
        return replace(choice, text=self._render(choice.picks), full=full, listed=listed)

    def keys_of(self, picks: _Picks) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The keys of the notes `picks` shows in full, and of those it shows as index lines."""
        if picks.every:
            return tuple(label for i, label in enumerate(_labels(self.refs)) if i != picks.every_but), ()
        label = _label(self.refs)
        return tuple(map(label, picks.full.tolist())), tuple(map(label, picks.index.tolist()))

    def _render(self, picks: _Picks) -> str:
        if picks.every:
            return format_notes([r for i, r in enumerate(self.refs) if i != picks.every_but])
        text = format_notes([self.refs[i] for i in picks.full.tolist()]) if len(picks.full) else "<notes>\n</notes>"
        if len(picks.index) or picks.omitted:
            index = [_index_line(self.refs[i]) for i in picks.index.tolist()]
            text += "\n" + format_index(index, picks.omitted)
        return text

    def _position(self, key: str | None) -> int | None:
        """The position in `refs` of document `key`'s note (None: no key, or no note), the map built on first use."""
        if key is None:
            return None
        if self._at is None:
            shared = self.refs.places() if isinstance(self.refs, NoteRefs) else None
            self._at = shared if shared is not None else {label: i for i, label in enumerate(_labels(self.refs))}
        return self._at.get(key)

    def release(self) -> None:
        """Drop what ranking and rendering built and can build again (the index lines, BM25's postings, the
        cost arrays, the positions by key): a selector kept for a rare later use (refitting the answer) does not hold them meanwhile.
        The embeddings' vectors stay (they were calls)."""
        self._line_cost, self._line_total = None, 0
        self._at = None
        self._cost_arrays = {}
        self._bm25 = None

    def _costs(self, kind: str) -> np.ndarray:
        """The notes' tokens in full ("full"), as index lines ("line"), or in full beyond their line ("extra")."""
        if kind not in self._cost_arrays:
            full, line = np.frombuffer(self._full_cost, dtype=np.int64), np.frombuffer(self._index(), dtype=np.int64)
            self._cost_arrays.update(full=full, line=line, extra=full - line)
        return self._cost_arrays[kind]

    def _index(self) -> array[int]:
        """Each note's tokens as an index line."""
        if self._line_cost is None:
            self._line_cost = array("q", (_line_tokens(_index_line(r)) for r in self.refs))
            self._line_total = sum(self._line_cost)
        return self._line_cost

    async def _scores(self, query: str) -> np.ndarray:
        """Every note's score for `query` (BM25, or cosine with embeddings)."""
        if self._embed is not None:
            return np.asarray(await self._embedding_scores(query), dtype=float)
        if self._bm25 is None:
            self._bm25 = notes_bm25(f"{r.title}\n{r.text}" for r in self.refs)  # each text made as it is indexed
        return self._bm25.score_array(query)

    async def _embedding_scores(self, query: str) -> list[float]:
        embed = self._embed
        if embed is None:
            raise RuntimeError("embedding scores need an embed function")
        if self._vectors is None:
            self._vectors = unit_rows(await embed([f"{r.title}\n{r.text}" for r in self.refs]))
        return (self._vectors @ unit_rows([(await embed([query]))[0]])[0]).tolist()  # rows are unit already


_BLOCK = 256  # notes ranked at a time, among those that still fit


_SAMPLED = 8  # `_best` over more than this many times `size` positions narrows them from a sample first
_GOLDEN = (5 ** 0.5 - 1) / 2  # the sample's offsets, j * _GOLDEN mod 1: spread evenly, periodic in nothing


def _best(scores: np.ndarray, among: np.ndarray | None, size: int) -> np.ndarray:
    """The best `size` positions of `among` (ascending; None: every position) by descending score, ties in
    position order, with every tie of the last one: a prefix of their ranking, found with a partition and
    a sort of it alone.

    Over many positions, a score from each run of `step` gives a floor that about `2 * size` clear: the
    partition then runs over those only (45,000 notes: one comparison each, and a partition of hundreds).
    The floor is at or below the size-th best score whenever at least `size` clear it (checked), so the
    result is the one a partition of every position gives; when too few clear it, they all go in."""
    values = scores if among is None else scores[among]
    n = len(values)
    if n > size:
        where = None
        if n > _SAMPLED * size:
            clear = np.flatnonzero(values >= _floor(values, size))
            if len(clear) >= size:
                where = clear
        top = values if where is None else values[where]
        cut = np.partition(top, len(top) - size)[len(top) - size]  # the size-th best score
        kept = np.flatnonzero(values >= cut) if where is None else where[top >= cut]
        values = values[kept]
        positions = kept if among is None else among[kept]
    else:
        positions = np.arange(n) if among is None else among
    return positions[np.argsort(-values, kind="stable")]


def _floor(values: np.ndarray, size: int) -> float:
    """A score that about `2 * size` of `values` clear, from a sample of one position in each run of `step`.

    The sample's position in each run shifts (a Weyl sequence): every `step`-th position alone misses every
    note of a kind that repeats with a period sharing a factor with `step` (notes made in turn from templates),
    and the floor then falls below all of them: every position clears it (100,000 such notes: 14 ms a
    read, not 1.4)."""
    step = len(values) // (_SAMPLED * size)
    strata = np.arange(len(values) // step)
    sample = values[strata * step + (strata * _GOLDEN % 1.0 * step).astype(np.int64)]
    k = min(len(sample), 2 * size // step + 1)
    return float(np.partition(sample, len(sample) - k)[len(sample) - k])


class _Ranked:
    """The notes ranked for one call (descending score, ties in position order, without `skip`), read
    only as far as the picks need: the best `_BLOCK` are sorted once (a partition, then a sort of
    them), and the rest only when a pick reads past them."""

    def __init__(self, scores: np.ndarray, skip: int | None):
        self.scores = scores
        self.skip = skip
        head = _best(scores, None, _BLOCK)
        self.head = head[head != skip] if skip is not None else head
        self.whole = len(head) == len(scores)

    def pick(self, costs: np.ndarray, budget: int, taken: Sequence[int] = ()) -> tuple[list[int], int]:
        """Positions in ranking order (`taken` left out), each taken when its cost fits what is left of
        `budget`; and what is left. The same as scanning the whole ranking: past the sorted head, only
        positions that fit what is left are ranked, `_BLOCK` at a time, and each block is scanned in
        order. A position passed over does not fit then and never will, as what is left only shrinks, so
        the block's positions leave the race. A negative cost (a note shorter than its index line) can
        make what is left grow: then the rest is ranked whole, as that no longer holds."""
        chosen: list[int] = []
        left = budget
        out = set(taken)
        for i, cost in zip(self.head.tolist(), costs[self.head].tolist(), strict=True):
            if cost <= left and i not in out:
                chosen.append(i)
                left -= cost
        if self.whole:
            return chosen, left
        open_ = np.ones(len(self.scores), dtype=bool)
        open_[self.head] = False
        if self.skip is not None:
            open_[self.skip] = False
        open_[list(out)] = False
        grows = int(costs.min()) < 0
        fits = np.flatnonzero(open_ if grows else open_ & (costs <= left))
        while len(fits):
            block = _best(self.scores, fits, len(fits) if grows else _BLOCK)
            open_[block] = False
            for i, cost in zip(block.tolist(), costs[block].tolist(), strict=True):
                if cost <= left:
                    chosen.append(i)
                    left -= cost
            # what still fits only narrows as `left` shrinks: the next pass filters this one's positions
            fits = fits[open_[fits]] if grows else fits[open_[fits] & (costs[fits] <= left)]
        return chosen, left


def shrink(budget: int | None, choice: NotesChoice) -> int:
    """The next, smaller budget after a request with `choice` did not fit the window: half of what it used."""
    used = choice.tokens if budget is None else min(budget, choice.tokens)
    return max(0, used // 2)


async def fitting(call: Callable[[NotesChoice], Awaitable[T]], choice: NotesChoice,
                  reselect: Callable[[int], Awaitable[NotesChoice]] | None, too_long: str | None = None) -> T:
    """`call(choice)`; when the endpoint refuses it as too long for the window, again with the notes
    `reselect(budget)` chooses within half the tokens the last try used (`shrink`), down to none. Then
    (or at once without `reselect`) the refusal is raised, saying `too_long` (what to do) when given."""
    budget: int | None = None
    while True:
        try:
            return await call(choice)
        except ContextTooLong as exc:
            if reselect is None or budget == 0:
                if too_long is None:
                    raise
                raise ContextTooLong(too_long, status=exc.status, body=exc.body) from exc
            budget = shrink(budget, choice)
            choice = await reselect(budget)


@dataclass(frozen=True)
class _Head:
    """The notes every population call is shown first when the final notes do not all fit: those that rank
    first for the task, in full, within `HEAD_SHARE` of the budget; and a selector for the others."""

    keys: tuple[str, ...]
    text: str
    tokens: int
    rest: NotesSelector
    budget: int  # what is left of the budget for the others

    def alone(self, others: int) -> NotesChoice:
        """The head as a choice of its own (for a document without a note), `others` notes left out."""
        return NotesChoice(self.text, shown=len(self.keys), indexed=0, omitted=others, tokens=self.tokens,
                           full=self.keys)

    def joined(self, tail: NotesChoice) -> NotesChoice:
        """The head, then `tail` (a choice of the other notes; its text left out when it has none)."""
        text = "\n".join(t for t in (self.text, tail.text) if t) if tail.text else ""
        return replace(tail, text=text, shown=len(self.keys) + tail.shown, tokens=self.tokens + tail.tokens,
                       full=self.keys + tail.full)


_PLANNED_AT_ONCE = 256  # choices made concurrently where they are made here (embeddings: a call each)


async def made_here(items: Sequence[T], choose: Callable[[T], Awaitable[R]],
                    each: Callable[[int, R], None] | None = None) -> list[R]:
    """`choose(item)` for each of `items`, in order, as a stage plans its calls' notes in this process: the
    first alone (it builds the index, or ranks the task's first line once), then `_PLANNED_AT_ONCE` at a time;
    with `each`, `each(i, made)` for each as it is made, and [] (they are kept elsewhere, not all at once)."""
    made: list[R] = []
    for at in (0, *range(1, len(items), _PLANNED_AT_ONCE)):
        chunk = await asyncio.gather(*(choose(item) for item in items[at:1 if at == 0 else at + _PLANNED_AT_ONCE]))
        if each is None:
            made += chunk
        else:
            for i, choice in enumerate(chunk, start=at):
                each(i, choice)
    return made


class PlannedChoices:
    """The notes choices a stage planned for its calls, kept on disk until each call goes out (`pop`): at D =
    100,000 a round's choices held at once took the driver 293 MiB between the rounds (bench_engine `runs`),
    and the memory stayed taken. Each is written as it is made (`PackedChoice.to_bytes`, `KeyedBytes`); what is
    held a call is where it is."""

    def __init__(self, places: Mapping[str, int] | None = None) -> None:
        self._choices = KeyedBytes(places)  # `places`: the run's parts' (`corpus.places`)

    def add(self, key: str, choice: PackedChoice) -> None:
        self._choices.put(key, choice.to_bytes())

    def pop(self, key: str) -> PackedChoice | None:
        """Document `key`'s choice, no longer kept; None when it has none (or it was taken already)."""
        data = self._choices.pop(key)
        return None if data is None else PackedChoice.from_bytes(data)

    def __len__(self) -> int:
        return len(self._choices)


HEAD_SHARE = 0.5  # of the notes budget: the notes in full every population call is shown first


class FinalNotes:
    """The last round's notes as the schema, population and the answer are shown them.

    The schema and the answer (one call each) are shown one selection for the task (`choice`). Population
    (a call per document) is shown the same when every note fits. When they do not, a population call is
    shown first the notes that rank first for the task, in full, within half the budget (`HEAD_SHARE`):
    the same for every call, so that a caching endpoint prefills them once; then, for a document with a
    final note, its own selection of the other notes within what is left (full and index lines, ranked
    for the task and its own note, as a later relevance round ranks the notes for a read); a document
    without a note (found irrelevant) is shown the first part alone. So a new, changed or deleted note
    changes only the population requests whose own selection holds it, but for a note among the first
    part (one selection for the task put every note it showed in every request). A call that does not
    fit the window is sent again with a smaller selection (`fit`, `for_document(budget=)`)."""

    def __init__(self, task: str, selector: NotesSelector, choice: NotesChoice,
                 notes: Mapping[str, str] | None = None, first: Sequence[int] | None = None):
        self.task, self.selector, self.choice = task, selector, choice
        self.notes: Mapping[str, str] = notes or {}
        self._head: _Head | None = None
        self._first = first  # the head's notes, when chosen with `choice` (`of` with `selects`)

    @classmethod
    async def of(cls, task: str, docs: Sequence[Document], notes: Mapping[str, str], budget: int | None,
                 embed: Embed | None = None, selects: Selects | None = None) -> FinalNotes:
        """The final `notes` of `docs`; when they do not all fit `budget` and `selects` is given (`--engine ray`),
        the choice for the task and the head's notes are made there, and no index is built over the notes here
        (at D = 100,000 the final notes and the schema took the driver from 420 to 470 MiB, ranking them the most)."""
        selector = NotesSelector(NoteRefs(docs, notes), budget, embed=embed)
        within = selector.budget
        if selects is None or embed is not None or within is None or selector.full_tokens() <= within:
            return cls(task, selector, await selector.select(task), notes)
        choice, head = await selects.select_many(selector.refs, within, [
            NotesQuery(task, None), NotesQuery(task, None, best=int(HEAD_SHARE * within))])
        return cls(task, selector, selector.filled(selector.unpack(choice)), notes, first=head.picks.full.tolist())

    @property
    def text(self) -> str:
        return self.choice.text

    @property
    def per_document(self) -> bool:
        """Whether population's calls are shown each their own selection (the notes do not all fit)."""
        return self.choice.selected

    async def head(self, budget: int | None = None) -> _Head:
        """The notes every population call is shown first (within `HEAD_SHARE` of `budget`, by default the
        selector's), with a selector for the others within what is left."""
        if budget is None and self._head is not None:
            return self._head
        selector = self.selector
        within = selector.budget if budget is None else budget
        first = (self._first if budget is None and self._first is not None
                 else await selector.best_in_full(self.task, int(HEAD_SHARE * (within or 0))))
        chosen = set(first)
        refs = [selector.refs[i] for i in first]
        tokens = sum(selector.full_cost(i) for i in first) + 4 if first else 0
        left = max(0, (within or 0) - tokens)
        others = (selector.refs.without(chosen) if isinstance(selector.refs, NoteRefs)
                  else [r for i, r in enumerate(selector.refs) if i not in chosen])
        rest = NotesSelector(others, left, embed=selector.embed)
        head = _Head(tuple(r.label for r in refs), format_notes(refs) if refs else "", tokens, rest, left)
        if budget is None:
            self._head = head
        return head

    @property
    def head_tokens(self) -> int:
        """Tokens of the notes every population call is shown first, once `head` chose them (else 0)."""
        return self._head.tokens if self._head is not None else 0

    def query(self, key: str) -> str:
        """What ranks the other notes for document `key`'s population call: the task and its own final note."""
        return f"{self.task}\n{self.notes.get(key, '')}"

    async def for_document(self, key: str, budget: int | None = None, *, compact: bool = False) -> NotesChoice:
        """The notes population shows document `key`: every note when they all fit (`choice`, the same for
        every document), else the head and, when it has a final note, its own selection of the others
        (`budget`: a smaller one, after a refusal as too long); `compact`: without the text of its own
        selection (`filled` renders it)."""
        if budget is None and not self.per_document:
            return self.selector.compact(self.choice) if compact else self.choice
        head = await self.head(budget)
        if not self.notes.get(key):
            return head.alone(len(head.rest.refs))
        return head.joined(await head.rest.select(self.query(key), budget=head.budget, compact=compact))

    def filled(self, choice: NotesChoice) -> NotesChoice:
        """A population choice with its text and keys, rendered again when `for_document(compact=True)` left
        them out (its positions are the head's `rest`'s)."""
        head = self._head
        if choice.text or choice.picks is None:
            return choice
        if head is None:
            return self.selector.filled(choice)
        tail = head.rest.filled(choice)
        return replace(tail, text="\n".join(t for t in (head.text, tail.text) if t), full=head.keys + tail.full)

    async def planned(self, keys: Sequence[str], selects: Selects | None = None,
                      places: Mapping[str, int] | None = None) -> PlannedChoices:
        """Each of `keys`' own selection of the other notes (for a document with a final note, when the notes do
        not all fit), made now and kept on disk until its call takes it (`chosen`); made by `selects` when given
        (`--engine ray`: on the workers, over a copy of the notes past the head) and the ranking is BM25.
        `places`: the run's parts' (`corpus.places`), where `keys` are theirs."""
        planned = PlannedChoices(places)
        if not self.per_document:
            return planned
        head = await self.head()
        # the head is chosen: what ranked it for the task is built again only for a call refused as too long
        # (`for_document(budget=)`); held through population's calls, it was 440 B a note (D = 20,000)
        self.selector.release()
        own = [k for k in keys if has_note(self.notes, k)]

        def keep(i: int, packed: PackedChoice) -> None:
            planned.add(own[i], packed)

        if selects is None or self.selector.embed is not None:
            await made_here(own, lambda k: head.rest.packed(self.query(k), budget=head.budget), keep)
        else:
            await selects.select_many(head.rest.refs, head.budget, Queries(own, lambda k: NotesQuery(self.query(k), None)),
                                      keep)
        return planned

    def chosen(self, key: str, planned: PlannedChoices) -> NotesChoice:
        """`for_document(key, compact=True)` as `planned` made it: the head and the document's own selection (taken
        from `planned`), or the head alone for a document without a note."""
        head = self._head
        packed = planned.pop(key)
        if head is None:
            raise RuntimeError("chosen() before planned()")  # our bug: the head is made by `planned`
        return head.alone(len(head.rest.refs)) if packed is None else head.joined(head.rest.unpack(packed))

    def populated(self) -> None:
        """Population's calls are done: the head and its selector of the other notes go, and the selector's
        index with them; the answer, which is shown `choice`, builds it again only when it is refitted (at D =
        2,000 with Ray, the two selectors' index lines and postings were 600 B a document at the run's peak)."""
        self._head = None
        self.selector.release()

    def summary(self) -> dict[str, Any]:
        """How the final notes were chosen, for the manifest."""
        choice = self.choice
        return {"notes": len(self.selector.refs), "shown": choice.shown, "indexed": choice.indexed,
                "omitted": choice.omitted, "tokens": choice.tokens, "full_tokens": self.selector.full_tokens(),
                "population": "per document" if self.per_document else "every note"}

    async def fit(self, call: Callable[[str], Awaitable[T]]) -> T:
        """`call(notes)`; when the endpoint refuses it as too long for the window, again with half the notes."""
        async def fewer(budget: int) -> NotesChoice:
            return await self.selector.select(self.task, budget=budget)

        return await fitting(lambda chosen: call(chosen.text), self.choice, fewer)
