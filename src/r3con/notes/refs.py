"""The notes as a selector reads them: `NoteRef` (a note labelled with its document key and title), and
`NoteRefs`, a round's notes made one at a time from where they are kept (a `SpooledNotes` on disk), so that
the driver does not hold every note's text; and a round's notes as its record lists them (`round_entries`)."""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from ..corpus.documents import Document
from ..corpus.places import Parts
from ..evidence.citations import document_refs
from .keyed import SpooledNotes

R = TypeVar("R")


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
    round's or the final notes, which a `SpooledNotes` holds on disk. Held: an int a note (its document's
    position in `docs`), not the notes' texts, which a large run's driver would otherwise hold through
    population and the answer."""

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
        each note back for it would double the notes read a call)."""
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
        """Note `at` (a position in `docs`), from the `RECENT` notes last read, else read back: the best-ranked notes
        are in most choices; the recent ones are bounded whatever the corpus."""
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


def labels_of(refs: Sequence[NoteRef]) -> Iterator[str]:
    """Each note's label (its document key), in order; a `NoteRefs` reads no note for them."""
    return refs.labels() if isinstance(refs, NoteRefs) else (r.label for r in refs)


def round_entries(parts: Sequence[Document], notes: Mapping[str, str]) -> Iterator[dict[str, Any]]:
    """A round's notes for its record (notes/round-N.json), one at a time: each with `refs`, the keys of the
    documents it names ("document 12"), for links and for knowing which notes name a document that left."""
    keys = {p.key for p in parts}
    return ({"doc": p.key, "title": p.title, "note": notes[p.key],
             "refs": document_refs(notes[p.key], keys, own=p.key)} for p in parts if p.key in notes)
