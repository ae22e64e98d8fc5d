"""The notes a call is shown of the other documents' notes: `NotesSelector` chooses them per call.

When the other documents' notes exceed a token budget, the most relevant go in full and the rest become
a compact index (document number, title, first words), so the model still knows they exist. Both are in
corpus order, and the index does not count the notes it leaves out: a call's notes text changes only
when what it is shown changes, so a later run over a grown corpus (`reuse`) can find it unchanged. Ranking is
BM25 over the notes, with the task (and, in the relevance rounds, the document's own previous note) as
the query, or embeddings when an embeddings endpoint is configured. When everything fits, the text is
exactly what the paper's method shows: `format_notes` of all the notes.

One `NotesSelector` is built per set of notes (a relevance round, or the final notes) and answers
each call's `select(query, exclude)`, so the index and the per-note sizes are computed once, and each
note's text as a call shows it is made once while it keeps being shown (`Fragments`). A stage plans its
calls' choices first (`made_here`, or elsewhere through `Selects`), keeps them on disk by positions
(`PlannedChoices`) and renders each as its call goes out (`filled`); a call refused as too long for the
window is sent again with fewer notes (`fitting`).

The notes' package, by module: `refs` (the notes as a selector reads them), `fragments` (how they read in a
prompt), `ranking` (BM25 and the partial sort), `choices` (a choice and its records), this module (the
selector), `final` (the final notes: schema, population, answer), `keyed` and `shown` (what is kept on disk).
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from ..errors import ContextTooLong
from ..tokens import estimate_tokens
from .choices import (
    NotesChoice,
    NotesQuery,
    PackedChoice,
    Picks,
    Queries,
    Selections,
    Selects,
    Shown,
    packed_positions,
    text_digest,
)
from .fragments import (
    INDEX_OVERHEAD,
    Fragments,
    IndexLine,
    format_index,
    format_notes,
    index_line,
    line_tokens,
)
from .keyed import KeyedBytes
from .ranking import Ranked, best_positions, notes_bm25, prefix_order, terms
from .refs import NoteRef, NoteRefs, has_note, labels_of, note_refs, round_entries
from .retrieval import BM25, unit_rows
from .tree import in_prefix_order

__all__ = [  # what other packages import from here (the final notes from `final`, which builds on this module)
    "BM25", "Embed", "IndexLine", "NoteRef", "NoteRefs", "NotesChoice", "NotesQuery",
    "NotesSelector", "PackedChoice", "Picks", "PlannedChoices", "Queries", "Selections", "Selects", "Shown",
    "fitting", "format_index", "format_notes", "has_note", "made_here", "note_refs", "notes_bm25", "prefix_order",
    "round_entries", "shrink", "terms", "text_digest",
]

T = TypeVar("T")
R = TypeVar("R")

Embed = Callable[[Sequence[str]], Awaitable[list[list[float]]]]


class NotesSelector:
    """Chooses, per call, which notes go in full and which as index lines, within `budget` tokens.

    `budget` None or 0 means no budget: every note in full, as the paper does.
    """

    def __init__(self, refs: Sequence[NoteRef], budget: int | None, *, embed: Embed | None = None):
        self.refs: Sequence[NoteRef] = refs if isinstance(refs, NoteRefs) else tuple(refs)  # NoteRefs: made when read
        self.budget = budget or None
        self._embed = embed
        self._at: Mapping[str, int] | None = None  # a note's position by its document key (`_position`)
        # each note's tokens in full (less the <notes> tags) and as an index line (`_index`, on first use): an int
        # a note each; the text a choice shows is joined from the pieces `_fragments` keeps of the notes it shows
        self._full_cost = array("q", (estimate_tokens(format_notes([r])) - 3 for r in self.refs))
        self._total = sum(self._full_cost) + 4
        self._line_cost: array[int] | None = None
        self._line_total = 0
        self._cost_arrays: dict[str, np.ndarray] = {}
        self._bm25: BM25 | None = None
        self._vectors: np.ndarray | None = None
        self._fragments = Fragments(self.refs)

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
        shown, _ = Ranked(await self._scores(query), None).pick(self._costs("full"), budget)
        return sorted(shown)

    def shared_text(self, exclude: str | None = None) -> str:
        """Every note but that of `exclude`, in `prefix_order`: for calls that put the notes first."""
        pos = self._position(exclude)
        return self._fragments.notes(prefix_order(len(self.refs), pos))

    def prefix_text(self, choice: NotesChoice, exclude: str | None = None) -> str:
        """`choice`'s text with its notes in full, and its index lines, each in `prefix_order` (`exclude`'s
        note left out): for calls that put a selection of the notes first. The same notes as `choice.text`."""
        picks = choice.picks
        if picks is None or picks.every:
            return self.shared_text(exclude) if picks is not None else choice.text
        count, own = len(self.refs), self._position(exclude)
        full = in_prefix_order(picks.full.tolist(), count, own)
        index = in_prefix_order(picks.index.tolist(), count, own)
        return self._render(Picks.of(full, index, picks.omitted))

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

    async def packedbest_positions(self, query: str, budget: int) -> PackedChoice:
        """`best_in_full(query, budget)` as it travels between processes: its positions as the notes in full."""
        shown = await self.best_in_full(query, budget)
        return PackedChoice(Picks.of(shown, [], 0), sum(self._full_cost[i] for i in shown) + 4 if shown else 0, b"")

    async def answer(self, query: NotesQuery, budget: int | None) -> PackedChoice:
        """`query`'s choice (`Selects`) with the selector's notes and `budget`."""
        if query.best is not None:
            return await self.packedbest_positions(query.query, query.best)
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
                           top=tuple(map(self._fragments.keys.__getitem__, packed.first())))

    async def _pick(self, query: str, exclude: str | None, budget: int | None, top: int) -> PackedChoice:
        # No step sorts or scans every note in Python: `_Ranked` reads the ranking only as far as the
        # budget lasts; the choice is the same as ranking every note and scanning all of them.
        pos = self._position(exclude)
        count = len(self.refs) - (pos is not None)
        full = self.full_tokens(exclude)
        scores = await self._scores(query) if top > 0 and count else None
        first = self._first(scores, pos, top) if scores is not None else b""
        if not count or budget is None or full <= budget:
            return PackedChoice(Picks(b"", 0, 0, every_but=pos, every=True), full, first)
        scores = await self._scores(query) if scores is None else scores
        line_cost = self._index()
        index_cost = INDEX_OVERHEAD + self._line_total - (line_cost[pos] if pos is not None else 0)
        remaining = budget - index_cost
        ranked = Ranked(scores, pos)
        if index_cost <= budget // 2:  # every other note at least as an index line; upgrade the best ranked
            shown, _ = ranked.pick(self._costs("extra"), remaining)
            others = np.ones(len(self.refs), dtype=bool)
            others[shown] = False
            if pos is not None:
                others[pos] = False
            indexed = np.flatnonzero(others).tolist()
        else:  # the index alone would crowd out the notes: half for the best in full, half for index lines
            shown, left = ranked.pick(self._costs("full"), budget // 2)
            indexed, _ = ranked.pick(self._costs("line"), left + budget - budget // 2 - INDEX_OVERHEAD, taken=shown)
        indexed.sort()  # the index lines in corpus order, as the notes in full
        omitted = count - len(shown) - len(indexed)
        # the costs already counted, not the text again
        tokens = int(self._costs("full")[shown].sum()) + 4
        if indexed or omitted:
            tokens += INDEX_OVERHEAD + int(self._costs("line")[indexed].sum())
        return PackedChoice(Picks.of(sorted(shown), indexed, omitted), tokens, first)

    def _first(self, scores: np.ndarray, pos: int | None, k: int) -> bytes:
        """The positions of the `k` notes that rank first by `scores` (without position `pos`), by the ranking
        the selection uses, whether or not every note fits: descending score, ties in corpus order; with BM25,
        only notes that share a term with the query."""
        best = best_positions(scores, None, min(len(scores), k + 1)).tolist()
        return packed_positions([i for i in best if i != pos and (self._embed is not None or scores[i] > 0)][:k])

    def compact(self, choice: NotesChoice) -> NotesChoice:
        """`choice` kept small while a round's other calls are planned: its positions (`picks`) alone, without
        its text and the keys it shows (a planned read's keys are many strings); `filled` restores them."""
        if choice.picks is None:
            return choice
        return NotesChoice("", choice.shown, choice.indexed, choice.omitted, choice.tokens, (), (), choice.top, choice.picks)

    def filled(self, choice: NotesChoice) -> NotesChoice:
        """`choice` with its text and keys, rendered again from its positions when `compact` left them out."""
        if choice.text or choice.picks is None:
            return choice
        picks = choice.picks
        full, listed = self.keys_of(picks)
        return NotesChoice(self._render(picks), choice.shown, choice.indexed, choice.omitted, choice.tokens, full, listed,
                           choice.top, picks)

    def keys_of(self, picks: Picks) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The keys of the notes `picks` shows in full, and of those it shows as index lines."""
        keys = self._fragments.keys
        if picks.every:
            but = picks.every_but
            return (tuple(keys) if but is None else (*keys[:but], *keys[but + 1:])), ()
        label = keys.__getitem__
        return tuple(map(label, picks.full.tolist())), tuple(map(label, picks.index.tolist()))

    def _render(self, picks: Picks) -> str:
        fragments = self._fragments
        if picks.every:
            but = picks.every_but
            return fragments.notes(range(len(self.refs)) if but is None else
                                   [*range(but), *range(but + 1, len(self.refs))])
        text = fragments.notes(picks.full.tolist()) if len(picks.full) else "<notes>\n</notes>"
        if len(picks.index) or picks.omitted:
            text += "\n" + fragments.index(picks.index.tolist(), picks.omitted)
        return text

    def _position(self, key: str | None) -> int | None:
        """The position in `refs` of document `key`'s note (None: no key, or no note), the map built on first use."""
        if key is None:
            return None
        if self._at is None:
            shared = self.refs.places() if isinstance(self.refs, NoteRefs) else None
            self._at = shared if shared is not None else {label: i for i, label in enumerate(labels_of(self.refs))}
        return self._at.get(key)

    def release(self) -> None:
        """Drop what ranking and rendering built and can build again (the index lines, BM25's postings, the
        cost arrays, the positions by key, the notes' pieces of text): a selector kept for a rare later use (refitting
        the answer) does not hold them meanwhile. The embeddings' vectors stay (they were calls)."""
        self._fragments = Fragments(self.refs)
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
            self._line_cost = array("q", (line_tokens(index_line(r)) for r in self.refs))
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
    """The notes choices a stage planned for its calls, kept on disk until each call goes out (`pop`): a large
    round's choices held at once were much of what its driver held between the rounds, and the memory stayed
    taken. Each is written as it is made (`PackedChoice.to_bytes`, `KeyedBytes`); what is
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
