"""Evidence: finding a record's passage in its document, resolving what notes and answers cite, counting.

A model asked to copy a passage verbatim mostly does, but changes white space, quotes, dashes and
case, sometimes a word or two, and sometimes invents one. `locate` tries, in order:

    exact      the passage occurs in the text as given (after trimming its ends)
    tolerant   it occurs once white space, dashes and hyphens (line-break hyphenation included),
               quotation marks and thousands separators are dropped, "per cent" read as "%", and Unicode compatibility forms (full-width
               punctuation, ligatures, the ellipsis character) and case folded; a passage the model
               shortened with "..." when its pieces occur in order, close together; a passage that
               occurs once the CJK particles 的 之 了 地 得 are dropped from both
    fuzzy      rapidfuzz's best partial alignment on the folded text scores at least FUZZY_THRESHOLD
               (passages of at least FUZZY_MIN_CHARS folded characters only: short ones align anywhere)

Spans always index the original text: folding keeps, for each folded character, the index of the
original character it came from.
"""

from __future__ import annotations

import bisect
import difflib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from rapidfuzz import fuzz
from rapidfuzz.distance import Indel

from ._fold import MARKS, PARTICLES, fold
from ._grounding import unsupported_numbers
from ._values import CJK_FUNCTION, ELLIPSIS, FUNCTION_WORDS, Token, Vocabulary, tokens
from .tokens import CJK_CHAR

MatchKind = Literal["exact", "tolerant", "fuzzy"]
Outcome = Literal["exact", "tolerant", "fuzzy", "mismatch", "none"]
MATCH_KINDS = ("exact", "tolerant", "fuzzy", "mismatch", "none")
VERIFIED = ("exact", "tolerant", "fuzzy")

# Ten points above every invented passage measured and below most edits of 1-3 words (figures: docs/evidence.md).
FUZZY_THRESHOLD = 80.0
FUZZY_MIN_CHARS = 24
FUZZY_RETRIES = 2  # other places a passage that aligns with a differing value is tried at
TWIN_MARGIN = 2.0  # points below the best alignment another place may score and still be tried

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
    return _fuzzy(folded_needle, folded_text, index, hay.text)


def _fuzzy(needle: str, folded_text: str, index: tuple[int, ...], text: str) -> Match | None:
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


# -- values -----------------------------------------------------------------------------------------

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
        found = _fuzzy(needle, masked, index, hay.text)
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
    """The pieces that carry meaning (`r3con._values`) and differ between `passage` and the document at
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


# -- references in notes ----------------------------------------------------------------------------

_DOC_REF = re.compile(r"(?:\b(?:documents?|docs?\.?)|文档|文件)\s*(?:no\.?|number|#)?\s*(\d+)"
                      r"(?:\.(\d+)|\s*,?\s*(?:part|pt\.?)\s*(\d+))?", flags=re.IGNORECASE)


def document_refs(note: str, keys: Iterable[str], own: str | None = None) -> list[str]:
    """The documents a note names ("document 12", "Document 3, part 2", "Document 3.2"), as keys of `keys`.

    A part's key ("3.2") when the note names an existing part, else the document's number when the
    corpus has that document (whole or split); the note's own document or part (`own`) is left out.
    """
    known = set(keys)
    numbers = {k.split(".")[0] for k in known}
    mine = {own, own.split(".")[0]} if own else set()
    found: list[str] = []
    for m in _DOC_REF.finditer(note):
        number, part = m.group(1).lstrip("0") or "0", m.group(2) or m.group(3)
        key = f"{number}.{part}" if part and f"{number}.{part}" in known else number
        if number in numbers and key not in mine and key not in found:
            found.append(key)
    return found


# -- citations in the answer ------------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """One item the answer cites: a record (with its verified passage) or a whole document."""

    id: str
    kind: Literal["record", "document"]
    doc: int
    title: str
    passage: str | None = None
    span: tuple[int, int] | None = None
    match: str | None = None
    differences: tuple[Difference, ...] = ()  # a mismatch: the values that differ from the document
    ungrounded: tuple[str, ...] = ()  # the record's fields whose values are in neither its passage nor its document

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "doc": self.doc, "title": self.title, "passage": self.passage,
                "span": list(self.span) if self.span else None, "match": self.match,
                "differences": [d.to_dict() for d in self.differences], "ungrounded": list(self.ungrounded)}


@dataclass(frozen=True)
class Citations:
    """The answer's citations resolved: the evidence, in the order cited, and the ids that name nothing."""

    evidence: tuple[Evidence, ...] = ()
    unknown: tuple[str, ...] = field(default=())


_RECORD_ID = re.compile(r"\bR\d+(?:\.\d+){2}\b")
_DOC_ID = re.compile(r"^(?:d|doc\.?|document)?\s*#?\s*(\d+)$", flags=re.IGNORECASE)
_SOURCES = re.compile(r"^\s*\**\s*(?:sources?|citations?|cite[sd]?)\s*\**\s*:\s*(.*)$", flags=re.IGNORECASE | re.MULTILINE)


def split_sources(text: str) -> tuple[str, list[str]]:
    """The reply without its last "Sources:" line, and the ids that line names (record ids, "Document 7")."""
    found = list(_SOURCES.finditer(text))
    if not found:
        return text, []
    last = found[-1]
    rest = (text[:last.start()] + text[last.end():]).strip()
    items = [s.strip(" .;[]()'\"`*") for s in re.split(r"[,;]|\s+and\s+", last.group(1))]
    ids: list[str] = []
    for item in items:
        if item.lower() in ("", "none", "n/a", "na", "-", "nothing"):
            continue
        records = _RECORD_ID.findall(item)
        ids.extend(records or [item])
    return rest, ids


def resolve_citations(cited: Sequence[Any], records: Iterable[Mapping[str, Any]],
                      titles: Mapping[int, str], texts: Mapping[int, str] | None = None) -> Citations:
    """The evidence behind `cited` (record ids like "R3.1.2", document numbers or "Document 7").

    A record's passage is the document's own text at its span when it was found (given `texts`, the
    documents' texts by number), else the passage the model gave. Unknown ids, and anything that is
    neither, are kept in `unknown` so the answer's reader sees them.
    """
    by_id = {str(r["_id"]): r for r in records if r.get("_id")}
    evidence: list[Evidence] = []
    unknown: list[str] = []
    seen: set[str] = set()
    docs_seen: set[int] = set()
    for raw in cited:
        item = str(raw).strip()
        if not item or item in seen:
            continue
        seen.add(item)
        record = by_id.get(item)
        if record is not None:
            span = record.get("_span")
            number = int(record["_doc"])
            passage = record.get("_passage")
            if span and texts is not None and number in texts:
                passage = texts[number][int(span[0]):int(span[1])]
            differs = tuple(Difference(str(d.get("kind", "")), str(d.get("document", "")), str(d.get("record", "")))
                            for d in record.get("_mismatch") or () if isinstance(d, Mapping))
            evidence.append(Evidence(
                id=item, kind="record", doc=number, title=str(record.get("_title", "")), passage=passage,
                span=(int(span[0]), int(span[1])) if span else None, match=record.get("_match"),
                differences=differs, ungrounded=tuple(str(f) for f in record.get("_ungrounded") or ())))
            continue
        m = _DOC_ID.match(item) if not isinstance(raw, bool) else None
        if m and int(m.group(1)) in titles:
            number = int(m.group(1))
            if number in docs_seen:
                continue
            docs_seen.add(number)
            evidence.append(Evidence(id=f"Document {number}", kind="document", doc=number, title=titles[number]))
        else:
            unknown.append(item)
    return Citations(evidence=tuple(evidence), unknown=tuple(unknown))


# -- the answer's numbers ----------------------------------------------------------------------------


def unsupported_in_answer(answer: str, question: str, cited: Citations, records: Iterable[Mapping[str, Any]],
                          texts: Mapping[int, str], outputs: Sequence[str] = (),
                          final_code: str | None = None) -> tuple[str, ...]:
    """The answer's numbers (as written) that none of what it cites states: the cited records' values (less
    their ungrounded ones) and passages (the document's words at the span), the cited documents' texts; nor the question, nor what
    the agent's code printed (`outputs`, the observations before the last step). `final_code`: the code
    that called final_answer; a number of the answer not typed into it was computed over the records."""
    by_id = {str(r["_id"]): r for r in records if r.get("_id")}
    sources: list[str] = [question, *outputs]
    values: list[Any] = []
    for e in cited.evidence:
        if e.kind == "document":
            sources.append(texts.get(e.doc, ""))
            continue
        if e.passage:
            sources.append(e.passage)
        record = by_id.get(e.id, {})
        ungrounded = set(record.get("_ungrounded") or ())  # a value its document does not state supports nothing
        values.extend(v for k, v in record.items() if not k.startswith("_") and k not in ungrounded)
    return unsupported_numbers(answer, sources, values, final_code)


# -- counts -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvidenceStats:
    """How many records' passages were found in their documents with their values (in all and per
    document key), how, how many differ in a value (`mismatched`), and how many records have values
    found in neither their passage nor their document (`ungrounded`, `ungrounded_values` fields in all)."""

    records: int = 0
    verified: int = 0
    by_match: Mapping[str, int] = field(default_factory=dict)
    by_doc: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    reasked: int = 0  # documents re-asked for their unverified records
    dropped: int = 0  # unverified records left out (--unverified drop)
    ungrounded: int = 0  # records with a value in neither their passage nor their document
    ungrounded_values: int = 0  # such values, in all

    @property
    def share(self) -> float | None:
        return self.verified / self.records if self.records else None

    @property
    def mismatched(self) -> int:
        return self.by_match.get("mismatch", 0)

    @classmethod
    def of(cls, records: Sequence[Mapping[str, Any]], reasked: int = 0, dropped: int = 0) -> EvidenceStats:
        """Counts over `records` (dropped ones included, so the share says what the model gave)."""
        by_match = dict.fromkeys(MATCH_KINDS, 0)
        by_doc: dict[str, dict[str, int]] = {}
        ungrounded = ungrounded_values = 0
        for r in records:
            kind = str(r.get("_match") or "none")
            by_match[kind] = by_match.get(kind, 0) + 1
            key = str(r.get("_doc")) if "_part" not in r else f"{r.get('_doc')}.{r.get('_part')}"
            counts = by_doc.setdefault(key, {"records": 0, "verified": 0, "mismatch": 0, "ungrounded": 0})
            counts["records"] += 1
            counts["verified"] += kind in VERIFIED
            counts["mismatch"] += kind == "mismatch"
            missing = r.get("_ungrounded") or ()
            counts["ungrounded"] += bool(missing)
            ungrounded += bool(missing)
            ungrounded_values += len(missing)
        verified = sum(by_match.get(k, 0) for k in VERIFIED)
        return cls(records=len(records), verified=verified, by_match=by_match, by_doc=by_doc,
                   reasked=reasked, dropped=dropped, ungrounded=ungrounded, ungrounded_values=ungrounded_values)

    def to_dict(self) -> dict[str, Any]:
        share = self.share
        return {"records": self.records, "verified": self.verified,
                "share": None if share is None else round(share, 4), "by_match": dict(self.by_match),
                "mismatched": self.mismatched, "ungrounded": self.ungrounded,
                "ungrounded_values": self.ungrounded_values,
                "reasked_documents": self.reasked, "dropped": self.dropped,
                "by_doc": {k: {**v, "share": round(v["verified"] / v["records"], 4) if v["records"] else None}
                           for k, v in self.by_doc.items()}}

    def line(self) -> str:
        """One line for the CLI: the share verified and how, the mismatches, the ungrounded values."""
        if not self.records:
            return "no records"
        kinds = ", ".join(f"{self.by_match.get(k, 0)} {k}" for k in VERIFIED)
        flagged = self.records - self.verified
        tail = ""
        if flagged:
            tail = f"; {flagged} flagged" + (f" ({self.mismatched} with a value that differs from the document)"
                                             if self.mismatched else "") + (f", {self.dropped} dropped" if self.dropped else "")
        if self.ungrounded:
            tail += (f"; {self.ungrounded} records with values in neither their passage nor their document "
                     f"({self.ungrounded_values} values)")
        return (f"{self.verified} of {self.records} records' passages found in their documents, values and all "
                f"({self.share:.0%}: {kinds}){tail}")
