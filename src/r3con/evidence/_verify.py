"""Verifying a located passage's values against its document: what carries meaning in it (numbers,
dates, negations, names, units, directions, CJK terms: `r3con.evidence._values`) must be in the document at the
span as it is there; see `r3con.evidence.citations` and docs/evidence.md."""

from __future__ import annotations

import bisect
import difflib
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

from ._fold import fold
from ._locate import Haystack, Match, fuzzy_at, locate
from ._values import CJK_FUNCTION, ELLIPSIS, FUNCTION_WORDS, Token, tokens

Outcome = Literal["exact", "tolerant", "fuzzy", "mismatch", "none"]
FUZZY_RETRIES = 2  # other places a passage that aligns with a differing value is tried at
TWIN_MARGIN = 2.0  # points below the best alignment another place may score and still be tried

CANCEL_DISTANCE = 4  # passage tokens apart a moved value may be and still count as the same (dates reordered)


@dataclass(frozen=True)
class Difference:
    """A piece that carries meaning and differs: what the document says there, what the record says."""

    kind: str  # number, date, negation, unit, direction, name or term (a CJK character)
    document: str
    record: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "document": self.document, "record": self.record}

    def line(self) -> str:
        """One line: `document says "4,200", record says "4,800"` (a side with nothing says "(nothing)")."""
        return (f"{self.kind}: document says \"{self.document or '(nothing)'}\", "
                f"record says \"{self.record or '(nothing)'}\"")


@dataclass(frozen=True)
class Verdict:
    """A passage located and its values compared: `outcome` is the match's kind, `mismatch` when a value
    differs from the document at the span, or `none` when the passage was not found."""

    match: Match | None
    differences: tuple[Difference, ...] = ()

    @property
    def outcome(self) -> Outcome:
        if self.match is None:
            return "none"
        return "mismatch" if self.differences else self.match.kind


def verify(passage: str, text: str | Haystack) -> Verdict:
    """`locate` the passage, then compare what carries meaning in it with the document there (`differences`)."""
    hay = text if isinstance(text, Haystack) else Haystack(text)
    found = locate(passage, hay)
    if found is None or found.kind == "exact":
        return Verdict(found)
    verdict = Verdict(found, differences(passage, hay, found))
    if found.kind != "fuzzy" or not verdict.differences:
        return verdict
    first = found
    # a near-twin sentence (the same words about Series A and Series AA) may align best: look further
    needle, (folded_text, index) = fold(passage.strip())[0], hay.folded
    masked = folded_text
    for _ in range(FUZZY_RETRIES):
        lo, hi = bisect.bisect_left(index, found.start), bisect.bisect_left(index, found.end)
        masked = masked[:lo] + "\0" * (hi - lo) + masked[hi:]
        found = fuzzy_at(needle, masked, index, hay.text)
        if found is None or found.score < first.score - TWIN_MARGIN:
            break  # only a twin aligns as well: a looser alignment elsewhere is no evidence
        other = Verdict(found, differences(passage, hay, found))
        if not other.differences:
            return other
    return verdict


@dataclass
class _Chunk:
    anchor: int  # where in the passage's tokens
    passage: list[Token]
    document: list[Token]
    elided: bool
    passage_meaning: list[Token] = field(default_factory=list)
    document_meaning: list[Token] = field(default_factory=list)


def differences(passage: str, text: str | Haystack, match: Match) -> tuple[Difference, ...]:
    """The pieces that carry meaning (`r3con.evidence._values`) and differ between `passage` and the document at
    `match`: the passage's own tokens and the document's, aligned word by word. A piece of the passage
    that the document does not have there differs; a piece of the document the passage replaces with
    other words differs; one it only leaves out differs if it is a negation. Where the passage has "...",
    the document's words are elided, not missing."""
    hay = text if isinstance(text, Haystack) else Haystack(text)
    lo, hi = _one_sentence(passage.strip(), hay.text, *_value_span(passage.strip(), hay.text, match))
    before, after = _clause(hay.text, lo, hi)
    mine = tokens(passage, hay.vocabulary)
    if not any(t.norm != ELLIPSIS for t in mine):
        return ()  # punctuation only (a table's rule): nothing that carries meaning
    theirs = tokens(hay.text[before:after], hay.vocabulary, offset=before)
    chunks = _chunks(mine, theirs, lo, hi)
    _cancel(chunks)
    if any(t.norm == ELLIPSIS for t in mine):
        _cancel_elided(chunks)
    found: list[Difference] = []
    for c in chunks:
        replaced = not c.elided and any(t.norm != ELLIPSIS and (t.norm not in FUNCTION_WORDS and t.norm not in CJK_FUNCTION
                                                                or passage[t.start:t.start + 1].isupper())
                                        for t in c.passage)
        theirs_counted = [t for t in c.document_meaning if replaced or t.flag == "negation"]
        if not c.passage_meaning and not theirs_counted:
            continue
        kind = (c.passage_meaning or theirs_counted)[0].flag or "term"
        doc_side = hay.text[c.document[0].start:c.document[-1].end] if c.document and not c.elided else ""
        words = [t for t in c.passage if t.norm != ELLIPSIS]
        found.append(Difference(kind, " ".join(doc_side.split()),
                                " ".join(passage[words[0].start:words[-1].end].split()) if words else ""))
    return tuple(found)


def _value_span(passage: str, text: str, match: Match) -> tuple[int, int]:
    """The span widened over the rest of a number it cuts ("-27.03" of "-27.03%") and over the punctuation
    the passage opens or closes with ("|" of a table row): a fuzzy span begins and ends where characters
    align, so a changed character next to it ("|非流动" copied as "|流动") would fall outside."""
    lo, hi = match.start, match.end
    while hi < len(text) and text[hi] in "%％" or (hi < len(text) and hi > 0 and text[hi - 1].isdigit() and text[hi].isdigit()):
        hi += 1
    while lo > 0 and text[lo - 1].isdigit() and text[lo].isdigit():
        lo -= 1
    # as many table-cell bars as the passage has, when it ends (or begins) with one: "|无|" copied as "||"
    for c, forward in ((passage[-1:], True), (passage[:1], False)):
        if c != "|":
            continue
        need = passage.count(c)
        while text.count(c, lo, hi) < need:
            at = text.find(c, hi, hi + CONTEXT) if forward else text.rfind(c, max(0, lo - CONTEXT), lo)
            if at < 0:
                break
            hi, lo = (at + 1, lo) if forward else (hi, at)
    return lo, hi


_SENTENCE_INSIDE = re.compile(r"(?<=[a-z\u00df-\u00ff]{3}[.!?])\s+(?=[A-Z“\"‘'])|(?<=[。！？])")


def _one_sentence(passage: str, text: str, lo: int, hi: int) -> tuple[int, int]:
    """A fuzzy span that runs over a sentence end the passage does not have ("she is not. She is in gay
    spirits" for "She is not in gay spirits") narrowed to its longest sentence: the passage copies one."""
    plain = unicodedata.normalize("NFKC", passage)
    if _SENTENCE_INSIDE.search(plain.rstrip(".!?。！？ ")) or "..." in plain:
        return lo, hi
    ends = [(m.start(), m.end()) for m in _SENTENCE_INSIDE.finditer(text, lo, hi) if lo < m.end() < hi]
    if not ends:
        return lo, hi
    pieces = list(zip([lo, *(e for _, e in ends)], [*(s for s, _ in ends), hi], strict=True))  # without the space between
    return max(pieces, key=lambda p: p[1] - p[0])


CONTEXT = 60  # characters of the document's sentence (or table cell) around a span that are aligned too


def _clause(text: str, lo: int, hi: int) -> tuple[int, int]:
    """The span widened to its sentence or table cell (at most CONTEXT characters each way): a word the
    passage leaves out at its edge ("I never thought" copied as "I thought") is outside a fuzzy span."""
    def ends(i: int) -> bool:  # a clause ends at text[i] ("10.3" is a number)
        return text[i] in _CLAUSE_END and not (text[i] == "." and 0 < i < len(text) - 1
                                                and text[i - 1].isdigit() and text[i + 1].isdigit())

    start, end = lo, hi
    before = len(text[:lo].rstrip()) - 1
    if before >= 0 and not ends(before):  # the span does not begin its sentence
        while start > 0 and lo - start < CONTEXT and not ends(start - 1):
            start -= 1
    after = hi + len(text[hi:]) - len(text[hi:].lstrip())
    if not ends(hi - 1) and not (after < len(text) and ends(after)):
        while end < len(text) and end - hi < CONTEXT and not ends(end):
            end += 1
    return start, end


_CLAUSE_END = frozenset(".!?;\n|。！？；")


def _chunks(mine: list[Token], theirs: list[Token], lo: int, hi: int) -> list[_Chunk]:
    """The places where the passage's tokens and the document's differ; the document's tokens outside
    [lo, hi) (the span's sentence around it) count only when the passage drops a negation there."""
    ops = difflib.SequenceMatcher(None, [t.norm for t in mine], [t.norm for t in theirs], autojunk=False).get_opcodes()
    out: list[_Chunk] = []
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        ps, ds = mine[i1:i2], theirs[j1:j2]
        if _joined(ps) == _joined(ds):
            continue  # "some-\nthing" and "something", "Jean-Pierre" and "JeanPierre", "449 449" in columns
        elided = any(t.norm == ELLIPSIS for t in ps)
        if not ps and all(t.start >= hi or t.end <= lo for t in ds) and not any(t.flag == "negation" for t in ds):
            continue  # the document's sentence around the span
        chunk = _Chunk(i1, ps, ds, elided)
        elided_words = {t.norm for t in ds} if elided else set()
        chunk.passage_meaning = [t for t in ps if t.flag and t.norm not in elided_words]
        chunk.document_meaning = [] if elided else [t for t in ds if t.flag and (lo <= t.start < hi or t.flag == "negation")]
        out.append(chunk)
    return out


def _joined(side: list[Token]) -> str:
    """A side's tokens run together, whole numbers by their digits: spacing is all that may tell them apart."""
    return "".join(t.norm[1:] if t.norm[1:].isdigit() and t.norm[0] == "#" else t.norm for t in side)


def _cancel_elided(chunks: list[_Chunk]) -> None:
    """A passage with "..." may align its pieces anywhere in the span: a value of it that the span has
    and no other piece took is there."""
    spare: dict[str, int] = {}
    for c in chunks:
        for t in c.document:
            spare[t.norm] = spare.get(t.norm, 0) + 1
        c.document_meaning = [t for t in c.document_meaning if t.flag == "negation" and not c.elided]
    for c in chunks:
        for t in list(c.passage_meaning):
            if spare.get(t.norm, 0) > 0:
                spare[t.norm] -= 1
                c.passage_meaning.remove(t)


def _cancel(chunks: list[_Chunk]) -> None:
    """A value the passage has in one place and the document in another nearby is the same value moved
    ("3 May 1897" and "May 3, 1897"): both are dropped from the comparison."""
    for a in chunks:
        for t in list(a.passage_meaning):
            for b in chunks:
                if abs(a.anchor - b.anchor) > CANCEL_DISTANCE and a is not b:
                    continue
                same = next((u for u in b.document_meaning if u.norm == t.norm), None)
                if same is not None:
                    a.passage_meaning.remove(t)
                    b.document_meaning.remove(same)
                    break
