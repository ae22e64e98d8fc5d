"""A run's record in its folder: the manifest, each stage's outputs as they come, and how the run ended.

The pipeline says what happened (`relevance`, `schema`, `records`, `answer`, `finish`, `ended`); this
module alone decides which files hold it: manifest.json, documents.jsonl, notes/round-N.json and
notes/shown-N.jsonl, schema.json, records.json and its CSV tables, transcript.json, usage.json,
answer.txt, result.json, error.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..artifacts.folder import Later, RunDir, disk_full, is_disk_full
from ..config import Settings
from ..corpus.documents import Document
from ..corpus.inputs import Inputs
from ..corpus.names import name_bytes
from ..corpus.names import shown as shown_name
from ..errors import R3conError
from ..llm import EndpointInfo, EndpointView
from ..notes.final import FinalNotes
from ..notes.selection import Selections, round_entries
from ..results import Failure
from ..stages.answer import AnswerResult
from ..stages.fanout import cause_of
from ..stages.plan import CacheSeen, Placement
from ..stages.populate import PopulateResult
from ..stages.relevance import RelevanceResult
from ..stages.schema import SchemaResult
from .memory import give_back

if TYPE_CHECKING:
    from .budgets import Budgets
    from .job import Job


def fallback(stage: str, failed: BaseException | str, how: str) -> dict[str, str]:
    """What failed in `stage` (an error or what went wrong) and how the run went on without it, for the
    manifest, the result and a warning line."""
    return {"stage": stage, "failed": failed if isinstance(failed, str) else cause_of(failed), "fallback": how}


class RunRecord:
    """The run folder of one attempt, written as the run goes: what each stage produced, what failed and
    how the run went on (`failures`, `fallbacks`), the stage it is in (`stage`)."""

    def __init__(self, job: Job, llm: EndpointView, parts: Sequence[Document], budgets: Budgets, *, ranking: str,
                 breakpoints: bool, placement: Placement):
        run_dir, resumed, settings, docs = job.run_dir, job.resumed, job.settings, job.docs
        inputs, notes_budget, corpus_store = job.inputs, budgets.notes_budget, job.store.to_dict
        self.run_dir, self.llm, self.placement = run_dir, llm, placement
        self.stage = "relevance"
        self.failures: list[Failure] = []
        self.fallbacks: list[dict[str, str]] = []  # manifest.json and result.json keep them (fallback())
        self.selections: dict[str, Selections] = {}
        self.seen = CacheSeen()  # what the endpoint's replies said of its prefix cache
        self.account = (inputs or Inputs.of(docs)).with_parts(parts)
        self._parts = _split(parts)  # parts per document split in several, for the manifest's entries
        manifest = _manifest(job.task, settings, llm, budgets.part_tokens)
        manifest["documents"] = Later(lambda: _documents(docs, self._parts))
        # an entry a document, each made as it is written: the whole account made at once was the end of a large
        # run's peak memory (docs/scale.md)
        manifest["inputs"] = Later(lambda: self.degraded().to_dict(lazy=True))
        manifest["attempts"] = _attempts(run_dir, resumed, manifest["started"])
        manifest["layout"] = {"layout": settings.layout, "cache_breakpoints": breakpoints}
        manifest["notes_selection"] = {
            "budget_tokens": notes_budget,
            "budget_source": "off" if notes_budget is None else ("config" if settings.notes_budget_tokens else "window"),
            "ranking": ranking, "query": "the task, and in relevance rounds the document's own last note",
        }
        manifest["fallbacks"] = self.fallbacks
        manifest["corpus_store"] = corpus_store()
        self._corpus_store = corpus_store  # what came from the corpus store, again at the end (embeddings)
        self.manifest = manifest
        run_dir.open(new=not resumed)  # made only now, with its manifest: see pipeline.run
        run_dir.write_json("manifest.json", manifest)
        self._docs: Sequence[Document] | None = docs  # documents.jsonl: written once the calls are done (`_save`)

    def replanned(self, parts: Sequence[Document], part_tokens: int, notes_budget: int | None) -> None:
        """The parts and notes planned again for a window a server's "too long" reply stated."""
        self.account = self.account.with_parts(parts)
        self.manifest["part_tokens"] = part_tokens
        self.manifest["notes_selection"]["budget_tokens"] = notes_budget
        self._parts = _split(parts)
        self._learned()
        self.run_dir.write_json("manifest.json", self.manifest)

    def _learned(self) -> None:
        """The window the server's "too long" replies stated, in the manifest, when they taught one."""
        learned = self.llm.learned_window()
        if learned is not None:
            self.manifest["endpoint"]["learned_window"] = learned

    def went_on(self, stage: str, failed: BaseException | str, how: str) -> dict[str, str]:
        """`stage` failed and the run went on without it (`fallback`); what the manifest says of it."""
        said = fallback(stage, failed, how)
        self.fallbacks.append(said)
        return said

    def relevance(self, result: RelevanceResult, parts: Sequence[Document]) -> None:
        """Each round's notes, what each later read was shown, the failed reads."""
        self.failures += result.failures
        self.seen = result.cache
        self.selections["relevance"] = result.selections  # the manifest keeps what is not empty
        for i, notes in enumerate(result.rounds, start=1):
            self.run_dir.write_json(f"notes/round-{i}.json", round_entries(parts, notes))
        for i, shown in enumerate(result.shown, start=2):
            self.run_dir.write_text(f"notes/shown-{i}.jsonl", shown.lines())

    def final_notes(self, final: FinalNotes) -> None:
        self.manifest["notes_selection"]["final"] = final.summary()

    def schema(self, proposal: SchemaResult) -> None:
        self.run_dir.write_json("schema_attempts.json", [a.__dict__ for a in proposal.attempts])
        self.llm.count("schema", {"reasks": len(proposal.attempts) - 1})
        self.run_dir.write_json("schema.json", proposal.schema)

    def kept_schema(self, schema: Mapping[str, Any]) -> None:
        """The schema of an earlier run of the question, kept (`--reuse approximate`)."""
        self.run_dir.write_json("schema.json", schema)

    def records(self, filled: PopulateResult) -> None:
        """The records, per table and as CSV, the records left out, and how their passages were found."""
        self.failures += filled.failures
        self.selections["populate"] = Selections(shared_first=filled.shared_first)
        self.llm.count("populate", {"json_repaired": filled.repaired, "reasks": filled.reasked})
        self.run_dir.write_json_rows("records.json", filled.tables)
        if filled.shown:  # the final notes chosen per document: what each population call was shown
            self.run_dir.write_text("notes/shown-populate.jsonl", filled.shown.lines())
        self.manifest["evidence_stats"] = Later(lambda: filled.evidence.to_dict(lazy=True))  # per part, as written
        if filled.dropped:  # --unverified drop: listed, never silently lost
            self.run_dir.write_json("dropped_records.json", list(filled.dropped))
        for name, rows in filled.tables.items():
            self.run_dir.write_table_csv(name, rows)  # not a copy of each: at D = 100,000, all of them again
        give_back()  # what population's calls freed, before the tables' libraries and frames take theirs
        self.manifest["tables"] = _write_tables(self.run_dir, filled.tables)

    def answer(self, answer: AnswerResult, sandbox_mode: str) -> None:
        if answer.isolation is not None:  # which sandbox layers the kernel allowed, for the record
            self.manifest["sandbox"] = {"mode": sandbox_mode, **answer.isolation}
        self.run_dir.write_json("transcript.json", {"mode": answer.mode, "capped": answer.capped,
                                                    "isolation": answer.isolation,
                                                    "steps": [s.to_dict() for s in answer.steps]})

    def reuse(self, decisions: Mapping[str, Any], summary: Mapping[str, Any]) -> None:
        """What came from earlier runs of the question: per document and stage in reuse.json, in sum in
        the manifest."""
        self.run_dir.write_json("reuse.json", dict(decisions))
        self.manifest["reuse"] = dict(summary)

    def degraded(self) -> Inputs:
        """The inputs' account with the documents that failed a stage."""
        return self.account.with_degraded(self.failures)

    def finish(self, answer: str, summary: Mapping[str, Any]) -> None:
        """The end of a run that answered: the manifest, usage, answer.txt and result.json."""
        self.stage = "finish"
        self._save()
        self.run_dir.write_text("answer.txt", answer + "\n")
        self.run_dir.write_json("result.json", dict(summary))
        (self.run_dir.path / "error.json").unlink(missing_ok=True)  # an earlier attempt's; the manifest's attempts keep it

    def ended(self, exc: BaseException) -> BaseException:
        """What ended the run, in error.json (with the traceback for our own bugs), and the usage and
        manifest so far; returns the error to raise (DiskFull for a full disk), leaving `exc` as it was (the
        pipeline hands the run folder and stage to `run(on_end=...)`). Never raises: the disk
        may be full, and the error that ended the run is the one to report."""
        stage = self.stage
        if isinstance(exc, R3conError):
            kind = "error"
        elif isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
            kind = "interrupted"
        else:
            kind = "disk full" if is_disk_full(exc) else "internal error"
        record: dict[str, Any] = {"stage": stage, "kind": kind, "error": f"{type(exc).__name__}: {exc}"}
        if kind == "internal error":
            record["traceback"] = "".join(traceback.format_exception(exc))
        with suppress(OSError):
            self.run_dir.write_json("error.json", record)
            self._save()
        if is_disk_full(exc):
            return disk_full(self.run_dir.path, exc, stage)
        return exc

    def _save(self) -> None:
        """usage.json and the manifest, with how many calls had their notes selected and put them first,
        per stage, and whether the endpoint kept the documents' prefixes between stages."""
        if self._docs is not None:
            # at the end, not in a thread while the calls go out: that thread's JSON held the GIL the event
            # loop needs for every send and reply (the first call of a 10,000-document run waited 0.25 s)
            _write_documents(self.run_dir, self._docs)
            self._docs = None
        total = self.llm.usage().to_dict()
        total["by_stage"] = {k: v.to_dict() for k, v in self.llm.usage_by_stage().items()}
        logged = self.llm.calls_logged()  # this attempt and earlier ones (--resume)
        total["run_folder_cost_usd"] = logged.total()
        total["calls_log"] = logged.to_dict()  # the report's timing, without reading calls.jsonl back
        manifest, selections = self.manifest, self.selections
        pooled = self.llm.endpoints()
        if pooled is not None:  # per endpoint of a pool, in both
            total["by_endpoint"] = manifest["endpoint"]["pool"] = pooled
        engine = self.llm.engine()
        if engine is not None:  # --engine ray: the cluster and what each worker did (`engine`)
            total["by_worker"] = engine["per_worker"]
            manifest["engine"] = engine
        self.run_dir.write_json("usage.json", total)
        manifest["notes_selection"]["calls"] = {stage: {"calls": s.calls, "selected": s.selected}
                                                for stage, s in selections.items() if s.calls}
        manifest["layout"]["shared_first_calls"] = {stage: s.shared_first for stage, s in selections.items()
                                                    if s.shared_first or stage == "populate"}
        manifest["layout"]["document_reuse"] = self.seen.to_dict(self.placement.adaptive)
        manifest["corpus_store"] = self._corpus_store()
        usage = self.llm.usage()  # what the run cost, said as the CLI says it ("price unknown", "local")
        manifest["cost"] = {**manifest.get("cost", {}), "cost_usd": usage.to_dict()["cost_usd"],
                            "text": usage.cost_text(), **({"unpriced": list(usage.unpriced)} if usage.unpriced else {})}
        self._learned()
        self.run_dir.write_json("manifest.json", manifest)


def _manifest(task: str, settings: Settings, view: EndpointView, budget: int) -> dict[str, Any]:
    return {
        "task": task,
        "r3con_version": __version__,
        "python": sys.version.split()[0],
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "endpoint": view.describe(),
        "settings": settings.public(),
        "setting_roles": Settings.roles(),  # request, question, run, operational: config.ROLES
        "cost": {"prices": _price_sources(settings, view.endpoint)},
        "part_tokens": budget,
    }


def _documents(docs: Sequence[Document], parts: Mapping[int, int]) -> Iterator[dict[str, Any]]:
    """The manifest's entry for each document, made as the manifest is written (`Entries`)."""
    for d in docs:
        yield {"doc": d.number, "title": d.title, "source": d.source, **_where(d), "chars": d.chars,
               "sha256": d.sha256, "tokens_estimate": d.tokens, "parts": parts.get(d.number, 1)}


def _split(parts: Sequence[Document]) -> dict[int, int]:
    """{number: parts} of the documents split in more than one part (the others have one: not held for each)."""
    return {p.number: p.parts for p in parts if p.parts > 1}


def _price_sources(settings: Settings, endpoint: EndpointInfo) -> dict[str, str]:
    """Where each model's price comes from: the --prices file, genai-prices, a local server (free), or why it is unknown."""
    from ..config import STAGES
    from ..llm.pricing import PriceTable

    prices = PriceTable.load(settings.prices_file, base_url=endpoint.base_url)
    models = dict.fromkeys(settings.model_for(s) or endpoint.model for s in STAGES)
    return {model: prices.quote(model).source for model in models}


def _write_tables(run_dir: RunDir, tables: Mapping[str, Any]) -> dict[str, Any]:
    """The records as Parquet and a DuckDB file (with r3con[sql]); what was written, or why not, for the manifest."""
    from ..artifacts.tables import NEEDS_DUCKDB, write_tables

    try:
        written = write_tables(run_dir.path, tables)
    except Exception as exc:  # noqa: BLE001 - the tables are a convenience: records.json and the CSVs stand
        if is_disk_full(exc):
            raise
        return {"files": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
    if not written:
        return {"files": [], "error": f"Parquet and records.duckdb {NEEDS_DUCKDB}"}
    return {"files": [str(p.relative_to(run_dir.path)) for p in written]}


def _attempts(run_dir: RunDir, resumed: bool, started: str) -> list[dict[str, Any]]:
    """The attempts made in this folder so far (from its manifest when resumed), this one last."""
    earlier: list[dict[str, Any]] = []
    if resumed:
        try:
            old = json.loads((run_dir.path / "manifest.json").read_text(encoding="utf-8"))
            earlier = list(old.get("attempts") or [{"started": old.get("started")}])
            error = json.loads((run_dir.path / "error.json").read_text(encoding="utf-8"))
            if earlier and "error" not in earlier[-1]:
                earlier[-1]["error"] = error.get("error")
        except (OSError, ValueError, AttributeError):
            pass
    return [*earlier, {"started": started}]


def _write_documents(run_dir: RunDir, docs: Sequence[Document]) -> None:
    """documents.jsonl: each whole document's text as loaded, which records' `_span`s index."""
    run_dir.write_text("documents.jsonl", (  # line by line: a large corpus's file need not be built in memory
        json.dumps({"doc": d.number, "title": d.title, "source": d.source, "text": d.text}, ensure_ascii=False) + "\n"
        for d in docs))


def _where(doc: Document) -> dict[str, str]:
    """{"path": the absolute path} of a document read from a file, so a resume from another folder finds it;
    with "source_b64" and "path_b64" (`_names.name_bytes`) when a name is shown escaped, so a resume finds
    the very file, not its printable name."""
    real = doc.path or doc.source
    if real.startswith("<"):
        return {}
    absolute = os.path.abspath(real)
    out = {"path": shown_name(absolute)}
    for key, name in (("source_b64", real), ("path_b64", absolute)):
        if (raw := name_bytes(name)) is not None:
            out[key] = raw
    return out
