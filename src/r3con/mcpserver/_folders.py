"""What the MCP tools read of run folders: the recent runs, a run's records by SQL, a cited passage.

Only files r3con wrote are read (manifest.json, result.json, error.json, usage.json, records.json,
documents.jsonl); the SQL runs over the records' tables with DuckDB's file access off (`artifacts.tables`)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..artifacts.folder import lock_holder
from ..artifacts.tables import query
from ..errors import InputError

ROWS = 200  # rows a `records` query returns at most: an agent's context is the limit, not the table
CONTEXT_CHARS = 400  # characters of the document shown before and after a passage


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def run_folder(path: str | Path) -> Path:
    """`path` as a run folder (one with a manifest.json), or an `InputError` that says what to pass."""
    folder = Path(path).expanduser()
    if not (folder / "manifest.json").is_file():
        raise InputError(f"{path} is not a run folder (no manifest.json); pass a run_dir that `ask` or `runs` gave")
    return folder


def status(folder: Path) -> str:
    """"finished", "failed", "cancelled", "running" (its lock is held) or "interrupted" (resumable)."""
    if (folder / "result.json").is_file():
        return "finished"
    error = _json(folder / "error.json")
    if isinstance(error, dict):
        return "cancelled" if error.get("kind") == "interrupted" else "failed"
    try:
        if lock_holder(os.stat(folder)) is not None:
            return "running"
    except OSError:
        pass
    return "interrupted"


def runs(out_dir: Path, limit: int = 20) -> list[dict[str, Any]]:
    """The `limit` most recent run folders under `out_dir`, newest first: question, status, cost, calls."""
    if not out_dir.is_dir():
        return []
    folders = sorted((p for p in out_dir.iterdir() if (p / "manifest.json").is_file()), key=lambda p: p.name,
                     reverse=True)  # named by their start time: newest last in name order
    out = []
    for folder in folders[:max(0, limit)]:
        manifest = _json(folder / "manifest.json") or {}
        usage = _json(folder / "usage.json") or {}
        error = _json(folder / "error.json") or {}
        out.append({"run_dir": str(folder), "question": manifest.get("task"), "started": manifest.get("started"),
                    "status": status(folder), "cost_usd": usage.get("run_folder_cost_usd", usage.get("cost_usd")),
                    "calls": usage.get("calls"), "error": error.get("error") if isinstance(error, dict) else None})
    return out


def records(folder: Path, sql: str, limit: int = ROWS) -> dict[str, Any]:
    """`sql` over the run's records' tables, read-only, at most `limit` rows; a query that would write or
    read a file (COPY ... TO, read_csv, ATTACH) is refused by DuckDB with its file access off."""
    columns, rows = query(run_folder(folder), sql, limit=limit)
    shown = [dict(zip(columns, (_plain(v) for v in row), strict=True)) for row in rows[:limit]]
    return {"columns": columns, "rows": shown, "truncated": len(rows) > limit}


def _plain(value: Any) -> Any:
    """A DuckDB value as JSON can hold it (dates, decimals and the like as text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def passage(folder: Path, record: str, context: int = CONTEXT_CHARS) -> dict[str, Any]:
    """Record `record`'s passage in run `folder`: its document's number, title and source, the passage as
    located, and the text around it."""
    folder = run_folder(folder)
    found = _record(folder, record)
    if found is None:
        raise InputError(f"no record {record!r} in {folder}; record ids look like R12.1.3 (see ask's citations)")
    table, row = found
    doc = row.get("_doc")
    out: dict[str, Any] = {"record": record, "table": table, "document": doc, "title": row.get("_title"),
                           "passage": row.get("_passage"), "match": row.get("_match"),
                           "fields": {k: v for k, v in row.items() if not k.startswith("_")}}
    text, source = _document(folder, doc)
    span = row.get("_span")
    out["source"] = source
    if text is not None and isinstance(span, list) and len(span) == 2 and all(isinstance(i, int) for i in span):
        start, end = max(0, span[0]), min(len(text), span[1])
        out["before"], out["after"] = text[max(0, start - context):start], text[end:end + context]
    return out


def _record(folder: Path, record: str) -> tuple[str, dict[str, Any]] | None:
    tables = _json(folder / "records.json")
    if not isinstance(tables, dict):
        raise InputError(f"{folder} holds no records yet (its population stage did not finish); resume the run")
    for table, rows in tables.items():
        for row in rows if isinstance(rows, list) else ():
            if isinstance(row, dict) and row.get("_id") == record:
                return str(table), row
    return None


def _document(folder: Path, doc: Any) -> tuple[str | None, str | None]:
    """The text and source of document number `doc`, read line by line from documents.jsonl."""
    for entry in _lines(folder / "documents.jsonl"):
        if entry.get("doc") == doc:
            text = entry.get("text")
            return (text if isinstance(text, str) else None), entry.get("source")
    return None, None


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict):
                    yield entry
    except OSError:
        return
