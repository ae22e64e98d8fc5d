"""Locating a passage in its document: exactly, tolerantly (folded), or fuzzily (rapidfuzz); see `r3con.evidence.citations`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from rapidfuzz import fuzz
from rapidfuzz.distance import Indel

from ..tokens import CJK_CHAR
from ._fold import MARKS, PARTICLES, fold
from ._values import Vocabulary

MatchKind = Literal["exact", "tolerant", "fuzzy"]

# Ten points above every invented passage measured and below most edits of 1-3 words (figures: docs/evidence.md).
FUZZY_THRESHOLD = 80.0
FUZZY_MIN_CHARS = 24


@dataclass(frozen=True)
class Match:
    """Where a passage was found: [start, end) in the original text, how, and the fuzzy score (100 otherwise)."""

    start: int
    end: int
    kind: MatchKind
    score: float = 100.0


@dataclass(frozen=True)
class Haystack:
    """A text to search, with its folded form computed once (a document is searched for many passages)."""

    text: str

    @cached_property
    def folded(self) -> tuple[str, tuple[int, ...]]:
        return fold(self.text)

    @cached_property
    def folded_bare(self) -> tuple[str, tuple[int, ...]]:
        """The folded text without the CJK particles a copy may drop (`PARTICLES`), with its index."""
        folded, index = self.folded
        kept = [i for i, c in enumerate(folded) if c not in PARTICLES]
        return "".join(folded[i] for i in kept), tuple(index[i] for i in kept)

    @cached_property
    def vocabulary(self) -> Vocabulary:
        """The words the text writes in lower case (its capitalised others are names)."""
        return Vocabulary(self.text)


def locate(passage: str, text: str | Haystack) -> Match | None:
    """Where `passage` is in `text`: exactly, tolerantly or fuzzily (see the module's docstring); None if not."""
    hay = text if isinstance(text, Haystack) else Haystack(text)
    needle = passage.strip()
    if not needle:
        return None
    at = hay.text.find(needle)
    if at >= 0:
        return Match(at, at + len(needle), "exact")
    folded_needle, _ = fold(needle)
    if not folded_needle:
        return None
    folded_text, index = hay.folded
    at = folded_text.find(folded_needle)
    if at >= 0:
        return Match(*_marks(needle, hay.text, index[at], index[at + len(folded_needle) - 1] + 1), "tolerant")
    elided = _elided(folded_needle, folded_text)
    if elided is not None:
        return Match(*_marks(needle, hay.text, index[elided[0]], index[elided[1] - 1] + 1), "tolerant")
    bare_needle = "".join(c for c in folded_needle if c not in PARTICLES)
    if len(bare_needle) >= 4 and CJK_CHAR.search(bare_needle):
        bare_text, bare_index = hay.folded_bare
        at = bare_text.find(bare_needle)
        if at >= 0:
            return Match(*_marks(needle, hay.text, bare_index[at], bare_index[at + len(bare_needle) - 1] + 1), "tolerant")
    if len(folded_needle) < FUZZY_MIN_CHARS or not folded_text:
        return None
    return fuzzy_at(folded_needle, folded_text, index, hay.text)


def fuzzy_at(needle: str, folded_text: str, index: tuple[int, ...], text: str) -> Match | None:
    """The fuzzy tier: rapidfuzz's best partial alignment of the folded passage, if it scores enough."""
    best = fuzz.partial_ratio_alignment(needle, folded_text, score_cutoff=FUZZY_THRESHOLD)
    if best is None or best.dest_end <= best.dest_start:
        return None
    start, end = _aligned(needle, folded_text, best.dest_start, best.dest_end)
    return Match(*_whole_words(text, index[start], index[end - 1] + 1), "fuzzy", round(best.score, 1))


WORD_SNAP = 30  # characters a fuzzy span may grow by to take in the rest of a word it cuts


def _whole_words(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) widened so that it neither begins nor ends inside a word (a highlight shows whole words)."""
    def inside(i: int) -> bool:
        return 0 < i < len(text) and _is_word(text[i - 1]) and _is_word(text[i])

    floor, ceiling = max(0, start - WORD_SNAP), min(len(text), end + WORD_SNAP)
    while start > floor and inside(start):
        start -= 1
    while end < ceiling and inside(end):
        end += 1
    return start, end


def _is_word(ch: str) -> bool:
    return ch.isalnum() and not CJK_CHAR.match(ch)  # each CJK character is a word of its own


def _marks(needle: str, text: str, start: int, end: int) -> tuple[int, int]:
    """The span widened over the quotation marks the passage opens or closes with (folding drops them)."""
    if needle[0] in MARKS:
        while start > 0 and text[start - 1] in MARKS:
            start -= 1
    if needle[-1] in MARKS:
        while end < len(text) and text[end] in MARKS:
            end += 1
    return start, end


ELISION_GAP = 400  # folded characters a "..." may stand for


def _elided(needle: str, text: str) -> tuple[int, int] | None:
    """[start, end) in folded `text` of a passage shortened with "...": its pieces (each of at least 8
    characters) in order, each at most ELISION_GAP after the one before; None if it has no such pieces."""
    pieces = [p for p in needle.split("...") if p]
    if len(pieces) < 2 or any(len(p) < 8 for p in pieces):
        return None
    at = text.find(pieces[0])
    while at >= 0:
        end, ok = at + len(pieces[0]), True
        for piece in pieces[1:]:
            nxt = text.find(piece, end, end + ELISION_GAP + len(piece))
            if nxt < 0:
                ok = False
                break
            end = nxt + len(piece)
        if ok:
            return at, end
        at = text.find(pieces[0], at + 1)
    return None


def _aligned(needle: str, text: str, start: int, end: int) -> tuple[int, int]:
    """The fuzzy window [start, end) of folded `text` narrowed to where `needle` aligns character by
    character: partial_ratio places a window as long as the needle, which may begin or end a few
    characters off (inside the word before, short of the last word)."""
    margin = max(8, len(needle) // 10)
    lo = max(0, start - margin)
    region = text[lo:min(len(text), end + margin)]
    # runs of at least two matching characters; a run at either edge that the text reaches only by
    # skipping more characters than the passage skips is a chance match in a neighbouring word
    equal = [op for op in Indel.opcodes(needle, region) if op.tag == "equal" and op.src_end - op.src_start >= 2]
    while (len(equal) > 1 and equal[0].src_end - equal[0].src_start <= 3
           and equal[1].dest_start - equal[0].dest_end > equal[1].src_start - equal[0].src_end + 3):
        equal.pop(0)
    while (len(equal) > 1 and equal[-1].src_end - equal[-1].src_start <= 3
           and equal[-1].dest_start - equal[-2].dest_end > equal[-1].src_start - equal[-2].src_end + 3):
        equal.pop()
    if not equal:
        return start, end
    return lo + equal[0].dest_start, lo + equal[-1].dest_end


def fuzzy_score(passage: str, text: str) -> float:
    """The fuzzy alignment score `locate` compares with FUZZY_THRESHOLD (for measuring the threshold)."""
    needle, _ = fold(passage)
    hay, _ = fold(text)
    best = fuzz.partial_ratio_alignment(needle, hay) if needle and hay else None
    return float(best.score) if best is not None else 0.0
