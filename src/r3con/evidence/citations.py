"""Evidence: finding a record's passage in its document, checking its values, resolving what notes and
answers cite, counting.

A model asked to copy a passage verbatim mostly does, but changes white space, quotes, dashes and
case, sometimes a word or two, and sometimes invents one. `locate` tries, in order:

    exact      the passage occurs in the text as given (after trimming its ends)
    tolerant   it occurs once both are folded (`r3con.evidence._fold`: white space, dashes and hyphens, quotation
               marks and thousands separators dropped, "per cent" read as "%", Unicode compatibility
               forms and case folded); a passage the model shortened with "..." when its pieces occur in
               order, close together; a CJK passage once the particles 的 之 了 地 得 are dropped from both
    fuzzy      rapidfuzz's best partial alignment on the folded text scores at least FUZZY_THRESHOLD
               (passages of at least FUZZY_MIN_CHARS folded characters only: short ones align anywhere)

`verify` then compares what carries meaning in a passage found tolerantly or fuzzily (numbers, dates,
negations, names, units, directions, CJK terms: `r3con.evidence._values`) with the document at the span: a
difference makes the outcome `mismatch`, with the differing pieces (`Difference`).

Spans always index the original text: folding keeps, for each folded character, the index of the
original character it came from.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from ..artifacts.jsonstream import Each
from ..corpus.places import PerPart
from ._fold import fold
from ._locate import FUZZY_MIN_CHARS, FUZZY_THRESHOLD, Haystack, Match, MatchKind, fuzzy_score, locate
from ._verify import Difference, Outcome, Verdict, differences, verify
from .grounding import unsupported_numbers

__all__ = ["FUZZY_MIN_CHARS", "FUZZY_THRESHOLD", "MATCH_KINDS", "VERIFIED", "Citations", "Difference", "Evidence",
           "EvidenceStats", "Haystack", "Match", "MatchKind", "Outcome", "Verdict", "differences", "document_refs",
           "fold", "fuzzy_score", "locate", "resolve_citations", "split_sources", "unsupported_in_answer", "verify"]

MATCH_KINDS = ("exact", "tolerant", "fuzzy", "mismatch", "none")
VERIFIED = ("exact", "tolerant", "fuzzy")


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
    by_id = _cited(records, {str(raw).strip() for raw in cited})
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


def _cited(records: Iterable[Mapping[str, Any]], ids: AbstractSet[str]) -> dict[str, Mapping[str, Any]]:
    """{id: record} of the records whose id is among `ids` (an answer cites a few of a run's 100,000)."""
    return {str(r["_id"]): r for r in records if r.get("_id") and str(r["_id"]) in ids}


# -- the answer's numbers ----------------------------------------------------------------------------


def unsupported_in_answer(answer: str, question: str, cited: Citations, records: Iterable[Mapping[str, Any]],
                          texts: Mapping[int, str], outputs: Sequence[str] = (),
                          final_code: str | None = None) -> tuple[str, ...]:
    """The answer's numbers (as written) that none of what it cites states: the cited records' values (less
    their ungrounded ones) and passages (the document's words at the span), the cited documents' texts; nor the question, nor what
    the agent's code printed (`outputs`, the observations before the last step). `final_code`: the code
    that called final_answer; a number of the answer not typed into it was computed over the records."""
    by_id = _cited(records, {e.id for e in cited.evidence if e.kind == "record"})
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


class DocEvidence(NamedTuple):
    """One document part's records and how many of them were verified, differ in a value, or are ungrounded."""

    records: int = 0
    verified: int = 0
    mismatch: int = 0
    ungrounded: int = 0


class _ByDoc(Mapping[str, DocEvidence]):
    """`EvidenceStats.by_doc` as `EvidenceStats.of` counts it: each part's four counts in arrays beside the run's
    parts' places (`corpus.places`), a `DocEvidence` made when asked for (a tuple a part held for the whole run
    was 80 B more, and the dict of them 40 B)."""

    def __init__(self, places: Mapping[str, int]):
        self._counts = tuple(PerPart(places) for _ in DocEvidence._fields)

    def count(self, key: str, verified: bool, mismatch: bool, ungrounded: bool) -> None:
        for counts, more in zip(self._counts, (True, verified, mismatch, ungrounded), strict=True):
            counts[key] = counts.get(key, 0) + more

    def __getitem__(self, key: str) -> DocEvidence:
        return DocEvidence(*(counts[key] for counts in self._counts))

    def __contains__(self, key: object) -> bool:
        return key in self._counts[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._counts[0])

    def __len__(self) -> int:
        return len(self._counts[0])


def _doc_counts(counts: DocEvidence) -> dict[str, Any]:
    return {**counts._asdict(), "share": round(counts.verified / counts.records, 4) if counts.records else None}


@dataclass(frozen=True)
class EvidenceStats:
    """How many records' passages were found in their documents with their values (in all and per
    document key), how, how many differ in a value (`mismatched`), and how many records have values
    found in neither their passage nor their document (`ungrounded`, `ungrounded_values` fields in all)."""

    records: int = 0
    verified: int = 0
    by_match: Mapping[str, int] = field(default_factory=dict)
    by_doc: Mapping[str, DocEvidence] = field(default_factory=dict)  # a tuple a part: a dict each was 260 B
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
    def of(cls, records: Iterable[Mapping[str, Any]], reasked: int = 0, dropped: int = 0,
           places: Mapping[str, int] | None = None) -> EvidenceStats:
        """Counts over `records` (dropped ones included, so the share says what the model gave), read once; those
        per document part in the order of `places` (the run's parts'), then of the parts first seen."""
        by_match = dict.fromkeys(MATCH_KINDS, 0)
        by_doc = _ByDoc(places if places is not None else {})
        count = ungrounded = ungrounded_values = 0
        for r in records:
            count += 1
            kind = str(r.get("_match") or "none")
            by_match[kind] = by_match.get(kind, 0) + 1
            key = sys.intern(str(r.get("_doc")) if "_part" not in r else f"{r.get('_doc')}.{r.get('_part')}")
            missing = r.get("_ungrounded") or ()
            by_doc.count(key, kind in VERIFIED, kind == "mismatch", bool(missing))
            ungrounded += bool(missing)
            ungrounded_values += len(missing)
        verified = sum(by_match.get(k, 0) for k in VERIFIED)
        return cls(records=count, verified=verified, by_match=by_match, by_doc=by_doc,
                   reasked=reasked, dropped=dropped, ungrounded=ungrounded, ungrounded_values=ungrounded_values)

    def to_dict(self, *, lazy: bool = False) -> dict[str, Any]:
        """The counts as JSON; `lazy`: those per document each made as it is written (`RunDir.write_json`)."""
        share = self.share
        return {"records": self.records, "verified": self.verified,
                "share": None if share is None else round(share, 4), "by_match": dict(self.by_match),
                "mismatched": self.mismatched, "ungrounded": self.ungrounded,
                "ungrounded_values": self.ungrounded_values,
                "reasked_documents": self.reasked, "dropped": self.dropped,
                "by_doc": Each(self.by_doc, _doc_counts) if lazy else {k: _doc_counts(v) for k, v in self.by_doc.items()}}

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
