"""Selective notes: when the other documents' notes exceed a token budget, show the most relevant in full.

The rest become a compact index (document number, title, first words), so the model still knows they
exist. Ranking is BM25 over the notes, with the task (and, in the relevance rounds, the document's own
previous note) as the query, or embeddings when an embeddings endpoint is configured. When everything
fits, the text is exactly what the paper's method shows: `format_notes` of all the notes.

One `NotesSelector` is built per set of notes (a relevance round, or the final notes) and answers
each call's `select(query, exclude)`, so the index and the per-note sizes are computed once.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from .._prompts import render
from ..errors import ContextTooLong
from ..retrieval import BM25, unit_rows
from ..tokens import CJK_CHAR, estimate_tokens
from ._common import NoteRef, format_notes

T = TypeVar("T")
INDEX_WORDS = 12
_INDEX_OVERHEAD = 60  # tokens of the notes index's header and tags
_WORD = re.compile(r"[^\W\d_][^\W_]*|\d+", re.UNICODE)
_STOP = frozenset(
    "a an the and or of to in on at for by with from as is are was were be been it its this that these those "
    "which who what when where how not no he she his her they them their we you i".split()
)

Embed = Callable[[Sequence[str]], Awaitable[list[list[float]]]]


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


def notes_bm25(texts: Sequence[str]) -> BM25:
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


@dataclass(frozen=True)
class NotesChoice:
    """The notes text for one call, and how it was chosen."""

    text: str
    shown: int
    indexed: int
    omitted: int = 0
    tokens: int = 0

    @property
    def selected(self) -> bool:
        """True when some notes were left out of the full text (the budget applied)."""
        return self.indexed + self.omitted > 0


@dataclass(frozen=True)
class _IndexLine:
    label: str
    title: str
    start: str


def _index_line(ref: NoteRef) -> _IndexLine:
    words = ref.text.split()
    start = " ".join(words[:INDEX_WORDS]) + (" ..." if len(words) > INDEX_WORDS else "")
    return _IndexLine(ref.label, ref.title, start)


@dataclass(frozen=True)
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
        self.refs = tuple(refs)
        self.budget = budget or None
        self._embed = embed
        self._positions = {ref.label: i for i, ref in enumerate(self.refs)}
        self._full_cost = [estimate_tokens(format_notes([r])) - 3 for r in self.refs]  # less the <notes> tags
        self._total = sum(self._full_cost) + 4
        self._lines: list[_IndexLine] | None = None
        self._line_cost: list[int] = []
        self._bm25: BM25 | None = None
        self._vectors: np.ndarray | None = None

    @property
    def ranking(self) -> str:
        return "embeddings" if self._embed is not None else "bm25"

    def shared_text(self, exclude: str | None = None) -> str:
        """Every note but that of `exclude`, in `prefix_order`: for calls that put the notes first."""
        pos = self._positions.get(exclude) if exclude is not None else None
        return format_notes([self.refs[i] for i in prefix_order(len(self.refs), pos)])

    def full_tokens(self, exclude: str | None = None) -> int:
        """Estimated tokens of all notes in full (less the note of `exclude`)."""
        pos = self._positions.get(exclude) if exclude is not None else None
        return self._total - (self._full_cost[pos] if pos is not None else 0)

    async def select(self, query: str, exclude: str | None = None, budget: int | None = None) -> NotesChoice:
        """The notes text for a call whose query is `query`, without the note of `exclude` (a document key).

        `budget` overrides the selector's budget for this call (after a request did not fit the window).
        """
        budget = self.budget if budget is None else budget  # an explicit 0 leaves every note out
        return await self._choose(query, exclude, budget)

    async def _choose(self, query: str, exclude: str | None, budget: int | None) -> NotesChoice:
        keep = [i for i, r in enumerate(self.refs) if r.label != exclude]
        full = self.full_tokens(exclude)
        if not keep or budget is None or full <= budget:
            refs = [self.refs[i] for i in keep]
            return NotesChoice(format_notes(refs), shown=len(refs), indexed=0, tokens=full)
        order = await self._rank(query, keep)
        lines, line_cost = self._index()
        index_cost = _INDEX_OVERHEAD + sum(line_cost[i] for i in keep)
        remaining = budget - index_cost
        shown: set[int] = set()
        listed: set[int] = set(keep)
        if index_cost <= budget // 2:  # every other note at least as an index line; upgrade the best ranked
            for i in order:
                extra = self._full_cost[i] - line_cost[i]
                if extra <= remaining:
                    shown.add(i)
                    remaining -= extra
        else:  # the index alone would crowd out the notes: half for the best in full, half for index lines
            listed, remaining = set(), budget // 2
            for i in order:
                if self._full_cost[i] <= remaining:
                    shown.add(i)
                    remaining -= self._full_cost[i]
            remaining += budget - budget // 2 - _INDEX_OVERHEAD
            for i in order:
                if i not in shown and line_cost[i] <= remaining:
                    listed.add(i)
                    remaining -= line_cost[i]
        full_refs = [self.refs[i] for i in keep if i in shown]
        indexed = [i for i in order if i in listed and i not in shown]
        index = [lines[i] for i in indexed]
        omitted = len(keep) - len(shown) - len(index)
        text = format_notes(full_refs) if full_refs else "<notes>\n</notes>"
        tokens = sum(self._full_cost[i] for i in shown) + 4  # the costs already counted, not the text again
        if index or omitted:
            text += "\n" + render("notes_index", lines=index, omitted=omitted).text
            tokens += _INDEX_OVERHEAD + sum(line_cost[i] for i in indexed)
        return NotesChoice(text, shown=len(full_refs), indexed=len(index), omitted=omitted, tokens=tokens)

    def _index(self) -> tuple[list[_IndexLine], list[int]]:
        if self._lines is None:
            self._lines = [_index_line(r) for r in self.refs]
            self._line_cost = [estimate_tokens(f'Document {x.label} "{x.title}": {x.start}') for x in self._lines]
        return self._lines, self._line_cost

    async def _rank(self, query: str, keep: Sequence[int]) -> list[int]:
        """Positions in `keep`, best first; ties keep corpus order."""
        if self._embed is not None:
            scores = await self._embedding_scores(query)
        else:
            if self._bm25 is None:
                self._bm25 = notes_bm25([f"{r.title}\n{r.text}" for r in self.refs])
            scores = self._bm25.scores(query)
        return sorted(keep, key=lambda i: (-scores[i], i))

    async def _embedding_scores(self, query: str) -> list[float]:
        embed = self._embed
        if embed is None:
            raise RuntimeError("embedding scores need an embed function")
        if self._vectors is None:
            self._vectors = unit_rows(await embed([f"{r.title}\n{r.text}" for r in self.refs]))
        return (self._vectors @ unit_rows([(await embed([query]))[0]])[0]).tolist()  # rows are unit already


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
