"""Evidence: finding a record's passage in its document, resolving what notes and answers cite, counting.

A model asked to copy a passage verbatim mostly does, but changes white space, quotes, dashes and
case, sometimes a word or two, and sometimes invents one. `locate` tries, in order:

    exact      the passage occurs in the text as given (after trimming its ends)
    tolerant   it occurs once white space, dashes and hyphens (line-break hyphenation included) and
               quotation marks are dropped, and Unicode compatibility forms (full-width
               punctuation, ligatures, the ellipsis character) and case folded; a passage the model
               shortened with "..." when its pieces occur in order, close together
    fuzzy      rapidfuzz's best partial alignment on the folded text scores at least FUZZY_THRESHOLD
               (passages of at least FUZZY_MIN_CHARS folded characters only: short ones align anywhere)

Spans always index the original text: folding keeps, for each folded character, the index of the
original character it came from.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from rapidfuzz import fuzz
from rapidfuzz.distance import Indel

from .tokens import CJK_CHAR

MatchKind = Literal["exact", "tolerant", "fuzzy"]
MATCH_KINDS = ("exact", "tolerant", "fuzzy", "none")

# Ten points above every invented passage measured and below most edits of 1-3 words (figures: docs/evidence.md).
FUZZY_THRESHOLD = 80.0
FUZZY_MIN_CHARS = 24

_CJK_PUNCT = {ord("。"): ".", ord("、"): ","}  # the CJK full stop and comma, which NFKC keeps
# Hyphens and dashes (a model writes "--" for "—" or joins "some-\nthing") and quotation marks (curly or
# straight, or left out: 'he said "no"' for 'he said “no”' or 'he said no') are dropped.
_MARKS = frozenset("'‘’‚‛′`´" '"“”„‟″«»「」『』')
_DROPPED = frozenset("-‐‑‒–—―−\u00ad") | _MARKS


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


def fold(text: str) -> tuple[str, tuple[int, ...]]:
    """`text` folded for tolerant comparison, and for each folded character the index it came from."""
    out: list[str] = []
    index: list[int] = []
    memo: dict[str, str] = {}
    for i, c in enumerate(text):
        folded = memo.get(c)
        if folded is None:
            if c.isspace() or c in _DROPPED or unicodedata.category(c) == "Cf":
                folded = ""
            else:
                norm = unicodedata.normalize("NFKC", c).casefold().translate(_CJK_PUNCT)
                folded = "".join(d for d in norm if not d.isspace() and d not in _DROPPED)
            memo[c] = folded
        for d in folded:
            out.append(d)
            index.append(i)
    return "".join(out), tuple(index)


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
    if len(folded_needle) < FUZZY_MIN_CHARS or not folded_text:
        return None
    best = fuzz.partial_ratio_alignment(folded_needle, folded_text, score_cutoff=FUZZY_THRESHOLD)
    if best is None or best.dest_end <= best.dest_start:
        return None
    start, end = _aligned(folded_needle, folded_text, best.dest_start, best.dest_end)
    return Match(*_whole_words(hay.text, index[start], index[end - 1] + 1), "fuzzy", round(best.score, 1))


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
    if needle[0] in _MARKS:
        while start > 0 and text[start - 1] in _MARKS:
            start -= 1
    if needle[-1] in _MARKS:
        while end < len(text) and text[end] in _MARKS:
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


# -- references in notes ----------------------------------------------------------------------------

_DOC_REF = re.compile(r"(?:\b(?:documents?|docs?\.?)|文档|文件)\s*(?:no\.?|number|#)?\s*(\d+)"
                      r"(?:\.(\d+)|\s*,?\s*(?:part|pt\.?)\s*(\d+))?", flags=re.IGNORECASE)


def document_refs(note: str, keys: Iterable[str], own: str | None = None) -> list[str]:
    """The documents a note names ("document 12", "Document 3, part 2", "Document 3.2"), as keys of `keys`.

    A part's key ("3.2") when the note names an existing part, else the document's number when the
    corpus has that document (whole or split); the note's own document or part (`own`) is left out.
    """
    known = keys if isinstance(keys, AbstractSet) else set(keys)  # a set given is not copied: a call per note
    mine = {own, own.split(".")[0]} if own else set()
    found: list[str] = []
    for m in _DOC_REF.finditer(note):
        number, part = m.group(1).lstrip("0") or "0", m.group(2) or m.group(3)
        key = f"{number}.{part}" if part and f"{number}.{part}" in known else number
        if (number in known or f"{number}.1" in known) and key not in mine and key not in found:
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

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "doc": self.doc, "title": self.title, "passage": self.passage,
                "span": list(self.span) if self.span else None, "match": self.match}


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
            evidence.append(Evidence(
                id=item, kind="record", doc=number, title=str(record.get("_title", "")), passage=passage,
                span=(int(span[0]), int(span[1])) if span else None, match=record.get("_match")))
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


# -- counts -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvidenceStats:
    """How many records' passages were found, in all and per document (key), and how."""

    records: int = 0
    verified: int = 0
    by_match: Mapping[str, int] = field(default_factory=dict)
    by_doc: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    reasked: int = 0  # documents re-asked for their unverified records
    dropped: int = 0  # unverified records left out (--unverified drop)

    @property
    def share(self) -> float | None:
        return self.verified / self.records if self.records else None

    @classmethod
    def of(cls, records: Sequence[Mapping[str, Any]], reasked: int = 0, dropped: int = 0) -> EvidenceStats:
        """Counts over `records` (dropped ones included, so the share says what the model gave)."""
        by_match = dict.fromkeys(MATCH_KINDS, 0)
        by_doc: dict[str, dict[str, int]] = {}
        for r in records:
            kind = str(r.get("_match") or "none")
            by_match[kind] = by_match.get(kind, 0) + 1
            key = str(r.get("_doc")) if "_part" not in r else f"{r.get('_doc')}.{r.get('_part')}"
            counts = by_doc.setdefault(key, {"records": 0, "verified": 0})
            counts["records"] += 1
            counts["verified"] += kind != "none"
        verified = len(records) - by_match.get("none", 0)
        return cls(records=len(records), verified=verified, by_match=by_match, by_doc=by_doc,
                   reasked=reasked, dropped=dropped)

    def to_dict(self) -> dict[str, Any]:
        share = self.share
        return {"records": self.records, "verified": self.verified,
                "share": None if share is None else round(share, 4), "by_match": dict(self.by_match),
                "reasked_documents": self.reasked, "dropped": self.dropped,
                "by_doc": {k: {**v, "share": round(v["verified"] / v["records"], 4) if v["records"] else None}
                           for k, v in self.by_doc.items()}}

    def line(self) -> str:
        """One line for the CLI: the share verified and how."""
        if not self.records:
            return "no records"
        kinds = ", ".join(f"{self.by_match.get(k, 0)} {k}" for k in ("exact", "tolerant", "fuzzy"))
        flagged = self.records - self.verified
        tail = f"; {flagged} flagged" + (f", {self.dropped} dropped" if self.dropped else "") if flagged else ""
        return f"{self.verified} of {self.records} records' passages found in their documents ({self.share:.0%}: {kinds}){tail}"
