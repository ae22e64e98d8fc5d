"""Population's evidence: the passage field it asks for, and the check of each record's passage.

Every table's records get a required `_passage` (the sentence(s) of the document the record comes
from, copied verbatim; first, so that a model decoding in schema order quotes before it extracts).
Each record's passage is then located in its document part (`r3con.evidence.locate`) and the record
gains `_span` (offsets into the whole document's text) and `_match`; a record whose passage is not
found (or that gave none) is unverified: re-asked once, kept flagged, or dropped (`Unverified`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from ..corpus import Document
from ..evidence import Haystack, locate

PASSAGE = "_passage"
PASSAGE_SPEC = {
    "type": "string",
    "description": "the exact sentence(s) of the document this record comes from, copied verbatim",
}
EVIDENCE_FIELDS = ("_id", PASSAGE, "_span", "_match")
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


def check(tables: Mapping[str, list[dict[str, Any]]], doc: Document, hay: Haystack | None = None) -> None:
    """Locate every record's passage in `doc` (a part maps to its whole document) and set `_span`, `_match`."""
    hay = hay or Haystack(doc.text)
    for rows in tables.values():
        for row in rows:
            if not isinstance(row, dict):
                continue
            passage = row.get(PASSAGE)
            found = locate(passage, hay) if isinstance(passage, str) else None
            row[PASSAGE] = passage if isinstance(passage, str) else None
            row["_span"] = [doc.offset + found.start, doc.offset + found.end] if found else None
            row["_match"] = found.kind if found else "none"


def unverified(tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> Iterator[tuple[str, int, Mapping[str, Any]]]:
    """(table, 1-based position, record) of each record whose passage was not found."""
    for name, rows in tables.items():
        for i, row in enumerate(rows, start=1):
            if isinstance(row, Mapping) and row.get("_match") == "none":
                yield name, i, row


def record_id(doc: Document, index: int) -> str:
    """A record's stable id: R<document number>.<part>.<position among the part's records>."""
    return f"R{doc.number}.{doc.part}.{index}"


def ordered(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record with the model's fields first, then the source and evidence fields."""
    head = {k: v for k, v in record.items() if not k.startswith("_")}
    tail = ("_id", "_doc", "_part", "_title", PASSAGE, "_span", "_match")
    return {**head, **{k: record[k] for k in tail if k in record},
            **{k: v for k, v in record.items() if k.startswith("_") and k not in tail}}
