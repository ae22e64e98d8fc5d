"""How notes read in a prompt: a note in full (`format_notes`), the index of those not shown in full
(`format_index`), and `Fragments`, which joins a choice's text from each note's piece made once.

Formatted here, not by a template: most calls of a large run format notes and an index, and a template
renders them several times slower. A later round's or population's calls show many of the same
best-ranked notes, so each note's piece (in full, or as its index line) is made once and kept while it
is asked for; a choice's text is those pieces joined, the same text `format_notes` and `format_index`
give.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..prompts.render import attribute
from ..tokens import estimate_tokens
from .refs import NoteRef, labels_of

INDEX_WORDS = 12
INDEX_OVERHEAD = 60  # tokens of the notes index's header and tags
_INDEX_HEAD = ("<notes_index>\nNotes on these other documents are not shown in full, to fit the context window; they "
               "were ranked less relevant to the task. Each line gives the document, its title and how its note begins.\n")
_MORE = "... and more documents with notes, not listed.\n"
NO_NOTES = "<notes>\n(no document was found relevant)\n</notes>"


def format_notes(refs: Sequence[NoteRef]) -> str:
    """Notes as a prompt shows them in full: each labelled with its document number and title."""
    if not refs:
        return NO_NOTES
    return "<notes>\n" + "".join(map(_in_full, refs)) + "</notes>"


def format_index(lines: Sequence[IndexLine], omitted: int) -> str:
    """The index of the notes not shown in full: a line each (document, title, how the note begins), and
    whether more were left out."""
    return _INDEX_HEAD + "".join(map(_line_text, lines)) + (_MORE if omitted else "") + "</notes_index>"


@dataclass(frozen=True, slots=True)
class IndexLine:
    """A note as the index shows it: its document, its title and how it begins."""

    label: str
    title: str
    start: str


def index_line(ref: NoteRef) -> IndexLine:
    words = ref.text.split(None, INDEX_WORDS)  # the first words, and the rest (if any) unsplit
    start = " ".join(words[:INDEX_WORDS]) + (" ..." if len(words) > INDEX_WORDS else "")
    return IndexLine(ref.label, ref.title, start)


def line_tokens(line: IndexLine) -> int:
    """Estimated tokens of an index line (its title as written, not escaped)."""
    return estimate_tokens(f'Document {line.label} "{line.title}": {line.start}')


def _in_full(ref: NoteRef) -> str:
    return f'<note document="{ref.label}" title="{attribute(ref.title)}">\n{ref.text}\n</note>\n'


def _line_text(line: IndexLine) -> str:
    return f'Document {line.label} "{attribute(line.title)}": {line.start}\n'


def _index_text(ref: NoteRef) -> str:
    return _line_text(index_line(ref))


class Fragments:
    """A selector's notes as pieces of prompt text, each made from its `NoteRef` when first asked for and kept:
    a note in full, its index line; and every note's label. Kept: pieces of each kind up to `KEPT_CHARS`
    characters (the oldest let go first, down to half of it), so what is held is bounded whatever the corpus, and
    a note read back from disk is read again only once its piece was let go."""

    KEPT_CHARS = 4_000_000

    def __init__(self, refs: Sequence[NoteRef]):
        self._refs = refs
        self._kept: tuple[_Kept, _Kept] = (_Kept(_in_full), _Kept(_index_text))
        self._keys: list[str] | None = None

    @property
    def keys(self) -> list[str]:
        """Each note's label (its document key), in order: made once, without reading a note."""
        if self._keys is None:
            self._keys = list(labels_of(self._refs))
        return self._keys

    def notes(self, positions: Iterable[int]) -> str:
        """`format_notes` of the notes at `positions` (at least one), in that order."""
        kept = self._kept[0]
        pieces, made = kept.pieces.get, kept.made
        return "<notes>\n" + "".join([pieces(i) or made(self, i) for i in positions]) + "</notes>"

    def index(self, positions: Iterable[int], omitted: int) -> str:
        """`format_index` of the notes at `positions`, `omitted` more left out."""
        kept = self._kept[1]
        pieces, made = kept.pieces.get, kept.made
        lines = "".join([pieces(i) or made(self, i) for i in positions])
        return _INDEX_HEAD + lines + (_MORE if omitted else "") + "</notes_index>"

    def ref(self, position: int) -> NoteRef:
        return self._refs[position]


class _Kept:
    """One kind of piece by position, in the order made, and their characters."""

    __slots__ = ("chars", "make", "pieces")

    def __init__(self, make: Callable[[NoteRef], str]):
        self.make = make
        self.pieces: dict[int, str] = {}
        self.chars = 0

    def made(self, fragments: Fragments, position: int) -> str:
        piece = self.pieces[position] = self.make(fragments.ref(position))
        self.chars += len(piece)
        if self.chars > fragments.KEPT_CHARS:
            pieces = self.pieces
            for old in list(pieces):  # dicts keep insertion order: the oldest first
                if self.chars <= fragments.KEPT_CHARS // 2:
                    break
                self.chars -= len(pieces.pop(old))
        return piece
