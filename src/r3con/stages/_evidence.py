"""Population's evidence: the passage field it asks for, and the check of each record's passage.

Every table's records get a required `_passage` (the sentence(s) of the document the record comes
from, copied verbatim; first, so that a model decoding in schema order quotes before it extracts).
Each record's passage is then located in its document part (`r3con.evidence.citations.locate`) and the record
gains `_span` (offsets into the whole document's text) and `_match`; a record whose passage is not
found, or whose values (numbers, dates, negations, names) differ from the document there (`mismatch`,
with `_mismatch`), or that gave none, is unverified: re-asked once, kept flagged, or dropped
(`Unverified`). Each record's own scalar values are looked for too: `_ungrounded` lists those in
neither its passage nor its document.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from ..corpus.documents import Document
from ..evidence.citations import Haystack, verify
from ..evidence.grounding import Source, ungrounded

PASSAGE = "_passage"
PASSAGE_SPEC = {
    "type": "string",
    "description": "the exact sentence(s) of the document this record comes from, copied verbatim",
}
EVIDENCE_FIELDS = ("_id", PASSAGE, "_span", "_match", "_mismatch", "_ungrounded")
Unverified = Literal["reask", "keep", "drop"]
UNVERIFIED_CHOICES = ("reask", "keep", "drop")


def with_passage(schema: Mapping[str, Any], *, required: bool = True) -> dict[str, Any]:
    """`schema` with a `_passage` field first in every table's records (required unless `required` is False)."""
    out = copy.deepcopy(dict(schema))
    for table in (out.get("properties") or {}).values():
        items = table.get("items") if isinstance(table, dict) else None
        if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
            continue
        items["properties"] = {PASSAGE: dict(PASSAGE_SPEC), **{k: v for k, v in items["properties"].items() if k != PASSAGE}}
        rest = [r for r in items.get("required", []) if r != PASSAGE]
        items["required"] = [PASSAGE, *rest] if required else rest
    return out


def categorical(schema: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """Per table, the fields whose values are categories (an enum or a const), not words of the document."""
    out: dict[str, frozenset[str]] = {}
    for name, table in (schema.get("properties") or {}).items():
        items = table.get("items") if isinstance(table, dict) else None
        props = items.get("properties") if isinstance(items, dict) else None
        if isinstance(props, dict):
            out[name] = frozenset(k for k, v in props.items() if isinstance(v, dict) and ("enum" in v or "const" in v))
    return out


def check(tables: Mapping[str, list[dict[str, Any]]], doc: Document, hay: Haystack | None = None,
          skip: Mapping[str, frozenset[str]] | None = None, source: Source | None = None) -> None:
    """Verify every record's passage in `doc` (a part maps to its whole document): set `_span`, `_match`
    (`mismatch` with `_mismatch`, the differing values, when a value differs), and `_ungrounded` (the
    fields whose value is neither in the document's words at the span nor elsewhere in the document;
    fields in `skip`, per table, are categories and not looked for)."""
    hay = hay or Haystack(doc.text)
    whole = source or Source(doc.text)
    for name, rows in tables.items():
        for row in rows:
            if not isinstance(row, dict):
                continue
            passage = row.get(PASSAGE)
            verdict = verify(passage, hay) if isinstance(passage, str) else None
            found = verdict.match if verdict else None
            row[PASSAGE] = passage if isinstance(passage, str) else None
            row["_span"] = [doc.offset + found.start, doc.offset + found.end] if found else None
            row["_match"] = verdict.outcome if verdict else "none"
            row.pop("_mismatch", None)
            if verdict and verdict.differences:
                row["_mismatch"] = [d.to_dict() for d in verdict.differences]
            sources = (Source(hay.text[found.start:found.end]), whole) if found else (whole,)
            row.pop("_ungrounded", None)
            missing = ungrounded(row, sources, (skip or {}).get(name, ()))
            if missing:
                row["_ungrounded"] = missing


FLAGGED = ("mismatch", "none")  # passages that are not evidence: re-asked, kept flagged or dropped


def unverified(tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> Iterator[tuple[str, int, Mapping[str, Any]]]:
    """(table, 1-based position, record) of each record whose passage was not found or differs in a value."""
    for name, rows in tables.items():
        for i, row in enumerate(rows, start=1):
            if isinstance(row, Mapping) and row.get("_match") in FLAGGED:
                yield name, i, row


def record_id(doc: Document, index: int) -> str:
    """A record's stable id: R<document number>.<part>.<position among the part's records>."""
    return f"R{doc.number}.{doc.part}.{index}"


def ordered(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record with the model's fields first, then the source and evidence fields."""
    head = {k: v for k, v in record.items() if not k.startswith("_")}
    tail = ("_id", "_doc", "_part", "_title", PASSAGE, "_span", "_match", "_mismatch", "_ungrounded")
    return {**head, **{k: record[k] for k in tail if k in record},
            **{k: v for k, v in record.items() if k.startswith("_") and k not in tail}}
