"""The final notes (the last round's) as the schema, population and the answer are shown them (`FinalNotes`):
one choice for the task, or for population, when they do not all fit, the notes that rank first for the task
(the head, the same in every call) and each document's own choice of the others."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..corpus.documents import Document
from .choices import NotesChoice, NotesQuery, PackedChoice, Queries, Selects
from .fragments import format_notes
from .refs import NoteRefs, has_note
from .selection import Embed, NotesSelector, PlannedChoices, fitting, made_here

T = TypeVar("T")


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
        return NotesChoice(text, len(self.keys) + tail.shown, tail.indexed, tail.omitted, self.tokens + tail.tokens,
                           self.keys + tail.full, tail.listed, tail.top, tail.picks)


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
        (ranking the final notes was the most of what the schema stage added to a large run's driver)."""
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
        return NotesChoice("\n".join(t for t in (head.text, tail.text) if t), tail.shown, tail.indexed, tail.omitted,
                           tail.tokens, head.keys + tail.full, tail.listed, tail.top, tail.picks)

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
        # (`for_document(budget=)`), not held through population's calls
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
        index with them; the answer, which is shown `choice`, builds it again only when it is refitted (the two
        selectors' index lines and postings were a large share of the run's peak)."""
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
