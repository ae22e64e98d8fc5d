"""The run folder: everything a run did, written as it happens, so a run can be inspected and resumed.

    manifest.json         task, documents (titles, sizes, parts), settings, endpoint, versions
    notes/round-N.json    each round's note per document
    schema.json           the accepted schema; schema_attempts.json every proposal and its problem
    documents.jsonl       each document's text as loaded (the spans of records' passages index it)
    records.json          all records with their source documents and checked passages; records/TABLE.csv one file a table
    dropped_records.json  records left out because their passage is not in their document (--unverified drop)
    transcript.json       the agent's steps: reply, code, output, errors
    calls.jsonl           every LLM call: stage, document, request, response, usage, latency
    usage.json            usage and cost, in total and per stage
    result.json           the answer, its evidence, degraded documents, usage (what `r3con run --json` prints)
    error.json            written when the run failed: stage and message
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import InputError


def _slug(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "run"


class RunDir:
    """A run's folder; every write is atomic (temp file, then rename)."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, out_dir: Path, task: str) -> RunDir:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        path = Path(out_dir) / f"{stamp}-{_slug(task)}-{secrets.token_hex(2)}"
        try:
            path.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise InputError(f"cannot create run folder {path}: {exc.strerror or exc}; pass a writable --out") from exc
        return cls(path)

    @property
    def calls_path(self) -> Path:
        return self.path / "calls.jsonl"

    @property
    def scratch_root(self) -> Path:
        return self.path / "sandbox"

    def write_json(self, name: str, data: Any) -> Path:
        return self.write_text(name, json.dumps(data, ensure_ascii=False, indent=1, default=str) + "\n")

    def write_text(self, name: str, text: str) -> Path:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
        return target

    def write_table_csv(self, table: str, rows: list[dict[str, Any]]) -> Path:
        fields: list[str] = []
        for row in rows:
            fields.extend(k for k in row if k not in fields)
        target = self.path / "records" / f"{_slug(table, 80)}.csv"
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            for row in rows:
                writer.writerow({k: json.dumps(v, ensure_ascii=False) if isinstance(v, dict | list) else v
                                 for k, v in row.items()})
        return target
