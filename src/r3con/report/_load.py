"""Reading a run folder into the plain data the report shows; a missing or broken file is a problem listed, not an error.

A report is written at the end of every run, failed ones included, so each file is optional: the
report shows what the folder holds and names what it could not read.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..artifacts.folder import NotRows, json_rows
from ..artifacts.jsonstream import Rule, Where, read_pruned
from ..llm.layers.calllog import LogSummary
from ._diff import changed_share, word_diff

TEXTS_UP_TO = 2000  # documents whose texts a report page holds; beyond, only the cited ones (a page stays openable)
RECORDS_UP_TO = 2000  # records per table a large run's page holds (and the cited documents'): every record, held
# with the documents it names, would make the page the run's last and largest holder (docs/scale.md)
LISTED_UP_TO = 2000  # inputs of each kind (skipped, unreadable, ...) a large run's page lists
_SECRET_KEYS = ("api_key", "password", "pdf_password", "token", "secret")


class Folder:
    """A run folder's files, read leniently: each failure to read becomes a line in `problems`."""

    def __init__(self, path: Path):
        self.path = path
        self.problems: list[str] = []

    def json(self, name: str, default: Any = None) -> Any:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            return json.loads(raw)
        except ValueError as exc:
            self.problems.append(f"{name}: could not be read ({type(exc).__name__}: {exc})")
            return default

    def pruned(self, name: str, default: Any, rules: Sequence[Rule]) -> Any:
        """`json(name)` read a piece at a time, the items `rules` name kept where they say (`jsonstream`): a large
        run's manifest, reuse.json and notes are never parsed whole."""
        target = self.path / name
        if not target.exists():
            return default
        try:
            with target.open(encoding="utf-8") as file:
                return read_pruned(file, rules)
        except (OSError, ValueError) as exc:
            self.problems.append(f"{name}: could not be read ({type(exc).__name__}: {exc})")
            return default

    def text(self, name: str) -> str | None:
        target = self.path / name
        if not target.exists():
            return None
        try:
            return target.read_text(encoding="utf-8")
        except (OSError, ValueError) as exc:
            self.problems.append(f"{name}: could not be read ({type(exc).__name__}: {exc})")
            return None

    def records(self, up_to: int | None, cited: set[str]) -> dict[str, list[dict[str, Any]]]:
        """records.json's tables; with `up_to`, the first `up_to` records of each and the `cited` documents'
        (a large run's page). Read a record at a time when it is in `RunDir.write_json_rows`'s layout, so a
        large run's records are never all held; else parsed whole."""
        target = self.path / "records.json"
        if not target.exists():
            return {}
        try:
            with target.open(encoding="utf-8") as lines:
                return self._kept_records(json_rows(lines), up_to, cited)
        except NotRows:
            pass
        except (OSError, ValueError) as exc:
            self.problems.append(f"records.json: could not be read ({type(exc).__name__}: {exc})")
            return {}
        whole = _dict(self.json("records.json", {}))
        return self._kept_records(((str(k), r) for k, v in whole.items() for r in [None, *_list(v)]), up_to, cited)

    def _kept_records(self, rows: Iterable[tuple[str, Any]], up_to: int | None,
                      cited: set[str]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        seen: dict[str, int] = defaultdict(int)
        for table, row in rows:
            kept = out.setdefault(table, [])
            if not isinstance(row, dict):
                continue
            seen[table] += 1
            if up_to is None or seen[table] <= up_to or str(row.get("_doc")) in cited:
                kept.append(row)
        for table, n in seen.items():
            if up_to is not None and n > up_to:
                self.problems.append(f"records {table}: the first {up_to:,} of {n:,} and the cited documents' are "
                                     "in this page (all are in records.json)")
        return out

    def lines(self, name: str) -> list[dict[str, Any]]:
        """A JSON-lines file's objects; a broken line (a run killed while writing) is counted, not fatal."""
        return list(self.each_line(name))

    def each_line(self, name: str) -> Iterator[dict[str, Any]]:
        """`lines(name)` one at a time, read as they go (a large run's calls.jsonl need not fit in memory)."""
        target = self.path / name
        if not target.exists():
            return
        broken = 0
        try:
            with target.open(encoding="utf-8") as lines:
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        item = json.loads(line)
                    except ValueError:
                        broken += 1
                        continue
                    if isinstance(item, dict):
                        yield item
        except (OSError, ValueError) as exc:
            self.problems.append(f"{name}: could not be read ({type(exc).__name__}: {exc})")
        if broken:
            self.problems.append(f"{name}: {broken} line(s) could not be read")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def redact(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings without secrets (the manifest already masks the API key; this keeps it so if it did not).
    Names that end in a secret's name: `note_max_tokens` is not one."""
    return {k: ("***" if k.lower().endswith(_SECRET_KEYS) and v else v) for k, v in settings.items()}


def _notes(folder: Folder, limit: int | None = None,
           also: frozenset[str] = frozenset()) -> tuple[int, dict[str, list[dict[str, Any]]]]:
    """Each note key's rounds: text, the documents it names, and from round 2 on the word diff to the round before.
    With a `limit`: the notes of the first `limit` keys and of the documents in `also` (a large run), the
    others left as each round's file is read."""
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    kept: set[str] = set()  # the keys kept so far, as the files are read

    def wanted(_: Where, item: Any) -> bool:
        if not isinstance(item, dict) or "doc" not in item:
            return False
        key = str(item["doc"])
        if limit is None or key in kept or len(kept) < limit or key.split(".")[0] in also:
            kept.add(key)
            return True
        return False

    rounds = 0
    while (folder.path / "notes" / f"round-{rounds + 1}.json").exists():
        rounds += 1
        for item in _list(folder.pruned(f"notes/round-{rounds}.json", [], [((), wanted)])):
            key, note = str(item["doc"]), str(item.get("note", ""))
            entry: dict[str, Any] = {"round": rounds, "note": note, "refs": [str(r) for r in _list(item.get("refs"))]}
            earlier = by_key[key]
            if earlier and earlier[-1]["round"] == rounds - 1:
                diff = word_diff(earlier[-1]["note"], note)
                entry["diff"] = diff
                entry["changed"] = round(changed_share(diff), 3)
            earlier.append(entry)
    return rounds, dict(by_key)


def _schema_tables(schema: Any) -> list[dict[str, Any]]:
    """The schema as tables of fields (name, type, required, description), for reading rather than parsing."""
    tables = []
    for name, table in _dict(_dict(schema).get("properties")).items():
        items = _dict(_dict(table).get("items"))
        required = set(_list(items.get("required")))
        fields = []
        for field, spec in _dict(items.get("properties")).items():
            spec = _dict(spec)
            kind = spec.get("type", "")
            kind = " or ".join(map(str, kind)) if isinstance(kind, list) else str(kind)
            if spec.get("enum"):
                kind += " (" + ", ".join(map(str, spec["enum"])) + ")"
            fields.append({"name": str(field), "type": kind, "required": field in required,
                           "description": str(spec.get("description", ""))})
        tables.append({"name": str(name), "description": str(_dict(table).get("description", "")), "fields": fields})
    return tables


def _timing(folder: Folder, usage: Mapping[str, Any]) -> tuple[dict[str, dict[str, float]], int]:
    """Per stage: wall time from its first call's start to its last call's end, and the calls' summed
    latency; and how many calls there were. From usage.json's `calls_log` when it covers calls.jsonl as it
    is (the run kept it as it wrote), else read from calls.jsonl."""
    kept = _dict(usage.get("calls_log"))
    log = folder.path / "calls.jsonl"
    with contextlib.suppress(OSError):
        if isinstance(kept.get("stages"), dict) and isinstance(kept.get("calls"), int) \
                and kept.get("bytes") == log.stat().st_size:
            return kept["stages"], kept["calls"]
    summary = LogSummary.of_records(folder.each_line("calls.jsonl"))
    return summary.timing(), summary.calls


def _none(_: Where, __: Any) -> bool:
    return False


def _how_many(folder: Folder, result: Mapping[str, Any]) -> tuple[int, list[str]]:
    """How many documents the run has, and the numbers of the first `TEXTS_UP_TO`: from result.json and
    documents.jsonl where a finished run wrote them, else from the manifest's list (read, not kept)."""
    first: list[str] = []
    total = result.get("documents")
    if isinstance(total, int) and (folder.path / "documents.jsonl").exists():
        with contextlib.suppress(OSError), (folder.path / "documents.jsonl").open(encoding="utf-8") as lines:
            for line in lines:
                if len(first) >= TEXTS_UP_TO:
                    break
                with contextlib.suppress(ValueError):
                    first.append(str(json.loads(line)["doc"]))
        return total, first
    count = 0

    def listed(_: Where, entry: Any) -> bool:
        nonlocal count
        if isinstance(entry, dict):
            count += 1
            if len(first) < TEXTS_UP_TO:
                first.append(str(entry.get("doc")))
        return False

    folder.pruned("manifest.json", {}, [(("documents",), listed), (("inputs", "*"), _none),
                                        (("evidence_stats", "by_doc"), _none)])
    return count, first


def _texts(folder: Folder, cited: set[str] | None) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """documents.jsonl's texts, every one or (`cited`, a large run) the cited ones'; and the documents it lists
    (number, title, source) for a run whose manifest may not list them all (not for a large run)."""
    texts: dict[str, str] = {}
    listed: list[dict[str, Any]] = []
    for line in folder.each_line("documents.jsonl"):
        if "doc" in line:
            if cited is None or str(line["doc"]) in cited:
                texts[str(line["doc"])] = str(line.get("text", ""))
            if cited is None:
                listed.append({"doc": line["doc"], "title": line.get("title", ""), "source": line.get("source", "")})
    return texts, listed


def _within(mentioned: set[str], totals: Counter[str]) -> list[Rule]:
    """How a large run's manifest is read: its documents, their inputs and evidence counts, cut to the documents
    the page mentions, and the inputs of each other kind (skipped, unreadable, ...) to the first `LISTED_UP_TO`;
    `totals` counts the inputs of each kind."""
    def document(_: Where, entry: Any) -> bool:
        return isinstance(entry, dict) and str(entry.get("doc")) in mentioned

    def an_input(path: Where, entry: Any) -> bool:
        kind, index = str(path[1]), path[2]
        totals[kind] += 1
        if kind == "read":
            return isinstance(entry, dict) and str(entry.get("doc")) in mentioned
        return isinstance(index, int) and index < LISTED_UP_TO

    return [(("documents",), document), (("inputs", "*"), an_input),
            (("evidence_stats", "by_doc"), lambda path, _: str(path[-1]) in mentioned)]


def load(path: Path) -> dict[str, Any]:
    """Everything the report shows, as JSON-ready data (document texts under "texts", by document number).
    A large run's (more than `TEXTS_UP_TO` documents) page keeps the documents it mentions (the first ones,
    the cited ones, those of the records it holds), and its files are read a piece at a time, what the page
    does not keep left as it is read (`Folder.pruned`)."""
    folder = Folder(Path(path))
    # result.json's account of the inputs and evidence counts per document are the manifest's again: left
    result = _dict(folder.pruned("result.json", {}, [(("inputs", "*"), _none), (("evidence_stats", "by_doc"), _none)]))
    answer = folder.text("answer.txt")
    evidence = [e for e in _list(result.get("evidence")) if isinstance(e, dict)]
    cited = {str(e.get("doc")) for e in evidence}
    documents_total, first = _how_many(folder, result)
    large = documents_total > TEXTS_UP_TO
    texts, listed = _texts(folder, cited if large else None)
    if large:
        folder.problems.append(f"{documents_total:,} documents: the texts of the cited ones and the notes of the "
                               f"first {TEXTS_UP_TO:,} and the cited ones are in this page (all are in documents.jsonl "
                               "and notes/)")
    records = folder.records(RECORDS_UP_TO if large else None, cited)
    mentioned: set[str] | None = None
    totals: Counter[str] = Counter()
    if large:  # the page lists the documents it mentions; manifest.json, reuse.json and result.json hold all
        mentioned = set(first) | cited | {str(r.get("_doc")) for rows in records.values() for r in rows}
    manifest = _dict(folder.pruned("manifest.json", {}, _within(mentioned, totals) if mentioned is not None else []))
    documents = [d for d in _list(manifest.get("documents")) if isinstance(d, dict)]
    if mentioned is None:  # and any document only documents.jsonl lists (a run stopped before its manifest said)
        known = {str(d.get("doc")) for d in documents}
        documents += [d for d in listed if str(d["doc"]) not in known]
        documents_total = len(documents)
    else:
        folder.problems.append(f"{documents_total:,} documents: the {len(documents):,} this page mentions (the first "
                               f"{TEXTS_UP_TO:,}, the cited ones and those of the records in it) are listed, with "
                               "their inputs and reuse (all are in manifest.json, reuse.json and result.json)")
    rounds, notes = _notes(folder, TEXTS_UP_TO if large else None, frozenset(cited))
    schema = folder.json("schema.json")
    usage = _dict(folder.json("usage.json", {})) or _dict(result.get("usage"))
    timing, calls = _timing(folder, usage)
    settings = redact(_dict(manifest.get("settings")))
    inputs = _dict(manifest.get("inputs"))
    evidence_stats = manifest.get("evidence_stats") or result.get("evidence_stats")
    inputs_total = {kind: len(items) for kind, items in inputs.items() if isinstance(items, list)} | dict(totals)
    run = {k: manifest.get(k) for k in ("r3con_version", "python", "started", "part_tokens", "attempts",
                                        "layout", "notes_selection", "sandbox", "reuse") if k in manifest}
    question, tables, endpoint = str(manifest.get("task") or ""), _dict(manifest.get("tables")), _dict(manifest.get("endpoint"))
    del manifest
    reuse = _dict(_dict(folder.pruned("reuse.json", {}, [] if mentioned is None else [
        (("documents",), lambda path, _: str(path[-1]).split(".")[0] in mentioned)])).get("documents"))
    return {
        "run_dir": str(folder.path),
        "question": question,
        "answer": answer.rstrip("\n") if answer is not None else result.get("answer"),
        "error": folder.json("error.json"),
        "evidence": evidence,
        "unknown_citations": [str(u) for u in _list(result.get("unknown_citations"))],
        "unsupported_numbers": [str(n) for n in _list(result.get("unsupported_numbers"))],
        "evidence_stats": evidence_stats,
        "inputs": inputs,
        "inputs_total": inputs_total,
        "documents": documents,
        "documents_total": documents_total,
        "texts": texts,
        "rounds": rounds,
        "notes": notes,
        "schema": schema,
        "schema_tables": _schema_tables(schema),
        "records": records,
        "dropped": [r for r in _list(folder.json("dropped_records.json", [])) if isinstance(r, dict)],
        "tables": tables,  # the records as Parquet and records.duckdb, or why not
        "transcript": _dict(folder.json("transcript.json", {})),
        "usage": usage,
        "timing": timing,
        "calls": calls,
        "endpoint": endpoint,
        "settings": settings,
        "run": run,
        "reuse": reuse,
        "problems": folder.problems,
    }
