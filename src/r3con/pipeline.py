"""The R3CON pipeline: relevance rounds, schema, population, answer synthesis; artifacts as it goes."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from . import __version__
from ._fanout import DOCUMENT_ERRORS, cause_of, check_failed_share
from .artifacts import RunDir, disk_full, is_disk_full
from .config import Settings
from .corpus import Document, split_documents
from .errors import ConfigError, InputError, OutputError, R3conError
from .evidence import Evidence, EvidenceStats, document_refs, resolve_citations
from .inputs import Inputs
from .llm import CostCap, LLMStack, build_llm
from .llm.budget import spent_in
from .llm.layers import Progressed
from .llm.types import Usage
from .progress import NoProgress, Progress
from .report import try_write_report
from .results import Failure
from .resume import content_hash
from .sandbox import SandboxLimits
from .stages._common import note_refs
from .stages.answer import AgentStep, AnswerOptions, answer_direct, answer_with_code
from .stages.notes_select import Embed, NotesChoice, NotesSelector, Selections, fitting
from .stages.plan import CacheSeen, Placement
from .stages.populate import PopulateOptions, populate
from .stages.relevance import RelevanceOptions, extract_relevance
from .stages.schema import propose_schema, schema_text
from .tokens import estimate_tokens

T = TypeVar("T")
_PROMPT_OVERHEAD = 1500  # tokens for instructions, task and tags around a document


@dataclass(frozen=True, repr=False)
class RunResult:
    """What a run produced: the answer and everything it was built from."""

    answer: str
    task: str
    documents: tuple[Document, ...]
    parts: tuple[Document, ...]
    notes: tuple[Mapping[str, str], ...]
    schema: Mapping[str, Any] | None
    records: Mapping[str, tuple[Mapping[str, Any], ...]]
    steps: tuple[AgentStep, ...]
    capped: bool
    degraded: tuple[Failure, ...]
    usage: Usage
    by_stage: Mapping[str, Usage]
    run_dir: Path
    elapsed_s: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)
    model: str = ""  # the model the endpoint served (the configured one, or the first it lists)
    inputs: Inputs = Inputs()  # what became of every input: read, skipped, unreadable, duplicates, degraded
    evidence: tuple[Evidence, ...] = ()  # what the answer cites, resolved: records with their passages, documents
    unknown_citations: tuple[str, ...] = ()  # cited ids that name no record or document of the run
    evidence_stats: EvidenceStats | None = None  # records whose passages were found in their documents
    fallbacks: tuple[Mapping[str, str], ...] = ()  # what failed and how the run went on without it (`fallback`)
    report: Path | None = None  # the run folder's report.html
    report_error: str | None = None  # why there is no report.html, when writing it failed
    warnings: tuple[str, ...] = ()  # what the run noticed that may affect the answer (prompts near an unreported window)

    def __repr__(self) -> str:
        # short: the whole corpus would be megabytes, and asyncio formats the main task's result into
        # an error message it builds and drops at the end of every asyncio.run (Python 3.11)
        answer = self.answer if len(self.answer) <= 80 else self.answer[:77] + "..."
        return (f"RunResult(answer={answer!r}, documents={len(self.documents)}, parts={len(self.parts)}, "
                f"records={sum(len(v) for v in self.records.values())}, calls={self.usage.calls}, "
                f"degraded={len(self.degraded)}, run_dir={str(self.run_dir)!r})")

    def _repr_html_(self) -> str:
        """Jupyter's view: the answer, its evidence and the counts, escaped (documents and replies are untrusted)."""
        from .report import summary_html

        return summary_html(self)

    def records_frame(self) -> dict[str, Any]:
        """The records as pandas DataFrames, one per record type (`r3con.tables` names the columns)."""
        from .tables import frames

        return frames(self.records)

    def summary(self) -> dict[str, Any]:
        """The JSON object `r3con run --json` prints."""
        usage = self.usage.to_dict()
        usage["by_stage"] = {stage: u.to_dict() for stage, u in self.by_stage.items()}
        return {
            "answer": self.answer,
            "run_dir": str(self.run_dir),
            "documents": len(self.documents),
            "degraded": [f.to_dict() for f in self.degraded],
            "capped": self.capped,
            "usage": usage,
            "inputs": self.inputs.to_dict(),
            "evidence": [e.to_dict() for e in self.evidence],
            "unknown_citations": list(self.unknown_citations),
            "evidence_stats": self.evidence_stats.to_dict() if self.evidence_stats else None,
            "fallbacks": [dict(f) for f in self.fallbacks],
            "warnings": list(self.warnings),
        }


def part_budget(settings: Settings, context_window: int) -> int:
    """Tokens a document part may take: the window less the output, the prompt, and room for notes."""
    if settings.part_tokens:
        return settings.part_tokens
    free = context_window - max(settings.note_max_tokens, settings.populate_max_tokens) - _PROMPT_OVERHEAD
    return max(256, free // 2)


def notes_budget(settings: Settings, context_window: int, part_tokens: int) -> int | None:
    """Tokens the other documents' notes may take in one call; None: no budget (every note in full).

    `--notes-budget 0` turns selection off (the paper's behaviour even if the window overflows); unset,
    it is what the window leaves after the largest document part, the output and the instructions.
    """
    if settings.notes_budget_tokens == 0:
        return None
    if settings.notes_budget_tokens:
        return settings.notes_budget_tokens
    output = max(settings.note_max_tokens, settings.populate_max_tokens)
    return max(512, context_window - part_tokens - output - _PROMPT_OVERHEAD - 1000)


def use_breakpoints(settings: Settings, stack: LLMStack) -> bool:
    """Anthropic-style cache breakpoints: on, off, or (auto) when the endpoint or model looks like Anthropic's."""
    if settings.cache_breakpoints != "auto":
        return settings.cache_breakpoints == "on"
    names = f"{stack.endpoint.base_url} {stack.endpoint.model} {settings.model or ''}".lower()
    return "anthropic" in names or "claude" in names


def _manifest(task: str, docs: Sequence[Document], parts: Sequence[Document], settings: Settings,
              stack: LLMStack, budget: int) -> dict[str, Any]:
    return {
        "task": task,
        "r3con_version": __version__,
        "python": sys.version.split()[0],
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "endpoint": {"base_url": stack.endpoint.base_url, "model": stack.endpoint.model,
                     "context_window": stack.endpoint.context_window,
                     "context_window_source": stack.endpoint.context_window_source},
        "settings": settings.public(),
        "part_tokens": budget,
        "documents": [
            {"doc": d.number, "title": d.title, "source": d.source, "chars": len(d.text),
             "sha256": content_hash(d.text), "tokens_estimate": estimate_tokens(d.text),
             "parts": sum(1 for p in parts if p.number == d.number)}
            for d in docs
        ],
    }


def _check_failures(stage: str, failures: Sequence[Failure], total: int, settings: Settings) -> None:
    check_failed_share(stage, failures, total, settings.max_failed_share)


async def run(
    task: str, documents: Sequence[Document], settings: Settings, *,
    progress: Progress | None = None, llm: LLMStack | None = None, run_folder: Path | None = None,
    inputs: Inputs | None = None,
    cap: CostCap | None = None,
) -> RunResult:
    """Answer `task` over `documents` with R3CON; writes a run folder under `settings.out_dir`.

    `run_folder`: an existing run folder to continue in (`--resume`); with the LLM cache, every call that
    had succeeded there costs nothing again. `inputs`: the account of the files the documents came
    from (`load_corpus`); the run adds parts and degraded documents to it.
    had succeeded there costs nothing again, and `--max-cost` counts what its earlier attempts paid.
    `cap`: a spending cap shared with other runs (instead of one from `settings.max_cost_usd`).
    The folder is created only once the endpoint answered; a start that fails before any LLM call
    leaves no folder behind.
    """
    if not task.strip():
        raise InputError("the question is empty; pass the question as the first argument")
    if not documents:
        raise InputError("no documents given; pass files, folders or globs")
    resumed = run_folder is not None
    run_dir = RunDir(Path(run_folder)) if run_folder is not None else RunDir.allocate(settings.out_dir, task)
    if llm is not None:
        run_dir.open(new=not resumed)
        return await _run_in(run_dir, resumed, task, tuple(documents), settings, llm, progress or NoProgress(), inputs)
    async with build_llm(settings, calls_log=run_dir.calls_path, cap=cap) as stack:
        run_dir.open(new=not resumed)
        if notes_ranking(settings) != "embeddings":
            return await _run_in(run_dir, resumed, task, tuple(documents), settings, stack, progress or NoProgress(), inputs)
        async with stack.embedder(settings, "relevance") as embedder:
            return await _run_in(run_dir, resumed, task, tuple(documents), settings, stack, progress or NoProgress(), inputs,
                                 embed=embedder.embed if embedder is not None else None)


async def _run_in(run_dir: RunDir, resumed: bool, task: str, docs: tuple[Document, ...], settings: Settings,
                  llm: LLMStack, progress: Progress, inputs: Inputs | None,
                  embed: Embed | None = None) -> RunResult:
    """`_run` in `run_dir`; then the report is written (for a failed run too, with what the folder holds)
    and the folder made private, or the folder is removed if a new run made no call in it."""
    try:
        result = await _run(task, docs, settings, llm, run_dir, progress, inputs, embed=embed, resumed=resumed)
        path, problem = try_write_report(run_dir.path)
        return replace(result, report=path, report_error=problem)
    except BaseException as exc:
        used = llm.ledger.total()
        if not resumed and not (used.calls or used.cache_hits):
            run_dir.discard_if_unused()  # a start that failed before any LLM call leaves no folder
        if run_dir.path.is_dir():
            path, problem = try_write_report(run_dir.path)
            with suppress(AttributeError):  # for the CLI's report line
                exc.report, exc.report_error = path, problem  # type: ignore[attr-defined]
        raise
    finally:
        run_dir.seal()


def notes_ranking(settings: Settings) -> str:
    """How notes are ranked when they exceed the budget: bm25, or embeddings (needs --embedding-model)."""
    if settings.notes_ranking == "embeddings" and not settings.embedding_model:
        raise ConfigError("--notes-ranking embeddings needs an embeddings model: pass --embedding-model")
    if settings.notes_ranking == "auto":
        return "embeddings" if settings.embedding_model else "bm25"
    return settings.notes_ranking


async def _run(task: str, docs: tuple[Document, ...], settings: Settings, llm: LLMStack,
               run_dir: RunDir, progress: Progress, inputs: Inputs | None = None,
               embed: Embed | None = None, resumed: bool = False) -> RunResult:
    started = time.perf_counter()
    budget = part_budget(settings, llm.endpoint.context_window)
    parts = split_documents(docs, budget)
    manifest = _manifest(task, docs, parts, settings, llm, budget)
    account = (inputs or Inputs.of(docs)).with_parts(parts)
    manifest["inputs"] = account.to_dict()
    manifest["attempts"] = _attempts(run_dir, resumed, manifest["started"])
    notes_tokens = notes_budget(settings, llm.endpoint.context_window, budget)
    breakpoints = use_breakpoints(settings, llm)
    placement = Placement.of(settings)
    seen = CacheSeen()  # what the endpoint's replies said of its prefix cache
    selections: dict[str, Selections] = {}
    manifest["layout"] = {"layout": settings.layout, "cache_breakpoints": breakpoints}
    manifest["notes_selection"] = {
        "budget_tokens": notes_tokens,
        "budget_source": "off" if notes_tokens is None else ("config" if settings.notes_budget_tokens else "window"),
        "ranking": "embeddings" if embed is not None else "bm25", "query": "the task, and in relevance rounds the document's own last note",
    }
    run_dir.write_json("manifest.json", manifest)
    _write_documents(run_dir, docs)
    llm.ledger.subscribe(lambda stage, usage: progress.usage(llm.ledger.total()))
    failures: list[Failure] = []
    fallbacks: list[dict[str, str]] = []  # manifest.json and result.json keep them (fallback())
    manifest["fallbacks"] = fallbacks
    stage = "relevance"
    try:
        rounds: tuple[Mapping[str, str], ...] = ()
        if settings.rounds > 0:
            progress.stage("relevance", len(parts) * settings.rounds)
            relevance = await extract_relevance(Progressed(llm, progress.advance), task, parts, RelevanceOptions(
                rounds=settings.rounds, max_tokens=settings.note_max_tokens, temperature=settings.temperature,
                breakpoints=breakpoints, notes_budget=notes_tokens, placement=placement, embed=embed,
            ))
            rounds = relevance.rounds
            failures += relevance.failures
            seen = relevance.cache
            selections["relevance"] = relevance.selections  # _finish_manifest keeps what is not empty
            for i, notes in enumerate(rounds, start=1):
                run_dir.write_json(f"notes/round-{i}.json", _notes_json(parts, notes))
            _check_failures("relevance", failures, len(parts), settings)
        final_notes: Mapping[str, str] = rounds[-1] if rounds else MappingProxyType({})
        selector = NotesSelector(note_refs(parts, final_notes), notes_tokens, embed=embed)
        final_choice = await selector.select(task)
        notes_text = final_choice.text
        manifest["notes_selection"]["final"] = {
            "notes": len(selector.refs), "shown": final_choice.shown, "indexed": final_choice.indexed,
            "omitted": final_choice.omitted, "tokens": final_choice.tokens, "full_tokens": selector.full_tokens(),
        }

        schema: Mapping[str, Any] | None = None
        tables: Mapping[str, tuple[Mapping[str, Any], ...]] = MappingProxyType({})
        evidence_stats: EvidenceStats | None = None
        if settings.structuring:
            stage = "schema"
            progress.stage("schema", 1)
            try:
                proposal = await _fitting(selector, task, final_choice, lambda notes: propose_schema(
                    llm, task, notes, max_attempts=settings.schema_attempts, temperature=settings.temperature))
            except OutputError as exc:  # no usable schema: the answer comes from the notes alone
                fallbacks.append(fallback("schema", exc, "answered directly from the notes, without records"))
            else:
                run_dir.write_json("schema_attempts.json", [a.__dict__ for a in proposal.attempts])
                schema = proposal.schema
                llm.ledger.add("schema", Usage(events={"reasks": len(proposal.attempts) - 1}))
                run_dir.write_json("schema.json", schema)
            finally:
                progress.advance("schema")

        if schema is not None:
            stage = "populate"
            progress.stage("populate", len(parts))
            filled = await populate(Progressed(llm, progress.advance), task, schema, parts, notes_text, PopulateOptions(
                max_tokens=settings.populate_max_tokens, attempts=settings.populate_attempts,
                temperature=settings.temperature, breakpoints=breakpoints, selector=selector,
                placement=placement, reverse=settings.rounds % 2 == 1, cache=seen, unverified=settings.unverified,
            ))
            failures += filled.failures
            selections["populate"] = Selections(shared_first=filled.shared_first)
            llm.ledger.add("populate", Usage(events={"json_repaired": filled.repaired, "reasks": filled.reasked}))
            tables = filled.tables
            run_dir.write_json("records.json", {k: list(v) for k, v in tables.items()})
            evidence_stats = filled.evidence
            manifest["evidence_stats"] = evidence_stats.to_dict()
            if filled.dropped:  # --unverified drop: listed, never silently lost
                run_dir.write_json("dropped_records.json", list(filled.dropped))
            for name, rows in tables.items():
                run_dir.write_table_csv(name, [dict(r) for r in rows])
            manifest["tables"] = _write_tables(run_dir, tables)
            _check_failures("populate", failures, len(parts), settings)

        stage = "reason"
        progress.stage("reason", 1)
        missing = sorted({f.doc for f in failures}, key=_key_order)
        options = AnswerOptions(
            mode=settings.reasoning, max_steps=settings.max_steps, max_tokens=settings.reason_max_tokens,
            temperature=settings.temperature, data_view_chars=settings.data_view_chars,
            sandbox_limits=SandboxLimits(timeout_s=settings.sandbox_timeout_s, memory_mb=settings.sandbox_memory_mb),
            sandbox_mode=settings.sandbox_mode, scratch_root=run_dir.scratch_root,
        )
        schema_json = schema_text(schema) if schema else "(no schema: structuring was skipped)"
        answer = None
        if settings.reasoning == "code" and not fallbacks:
            try:
                answer = await _fitting(selector, task, final_choice, lambda notes: answer_with_code(
                    llm, task, dict(final_notes), notes, schema_json, tables, options, missing))
            except DOCUMENT_ERRORS as exc:  # the agent's calls broke: answer from the notes and the data
                fallbacks.append(fallback("reason", exc, "answered directly from the notes and the records"))
            else:
                if answer.capped and not answer.answer.strip():
                    fallbacks.append(fallback("reason", f"the agent gave no answer in {settings.max_steps} steps",
                                              "answered directly from the notes and the records"))
                    answer = None
        if answer is None:
            answer = await _fitting(selector, task, final_choice, lambda notes: answer_direct(
                llm, task, notes, schema_json, tables, options, missing))
        progress.advance("reason")
        if answer.isolation is not None:  # which sandbox layers the kernel allowed, for the record
            manifest["sandbox"] = {"mode": settings.sandbox_mode, **answer.isolation}
        run_dir.write_json("transcript.json", {"mode": answer.mode, "capped": answer.capped,
                                                "isolation": answer.isolation,
                                                "steps": [s.to_dict() for s in answer.steps]})
        stage = "finish"
        account = account.with_degraded(failures)
        manifest["inputs"] = account.to_dict()
        _finish_manifest(run_dir, manifest, selections, seen, placement)
        cited = resolve_citations(answer.citations, (r for rows in tables.values() for r in rows),
                                  {d.number: d.title for d in docs}, {d.number: d.text for d in docs})
        result = RunResult(
            answer=answer.answer, task=task, documents=docs, parts=parts, notes=rounds, schema=schema,
            records=tables, steps=answer.steps, capped=answer.capped, degraded=tuple(failures),
            usage=llm.ledger.total(), by_stage=MappingProxyType(llm.ledger.by_stage()), run_dir=run_dir.path,
            elapsed_s=time.perf_counter() - started, model=llm.endpoint.model, inputs=account,
            evidence=cited.evidence, unknown_citations=cited.unknown, evidence_stats=evidence_stats,
            fallbacks=tuple(fallbacks), warnings=llm.warnings(),
        )
        _write_usage(run_dir, llm)
        run_dir.write_text("answer.txt", result.answer + "\n")
        run_dir.write_json("result.json", result.summary())
        (run_dir.path / "error.json").unlink(missing_ok=True)  # an earlier attempt's; the manifest's attempts keep it
    except BaseException as exc:
        def save() -> None:
            _write_usage(run_dir, llm)
            manifest["inputs"] = account.with_degraded(failures).to_dict()
            _finish_manifest(run_dir, manifest, selections, seen, placement)

        _record_end(run_dir, stage, exc, save)
        if is_disk_full(exc):
            full = disk_full(run_dir.path, exc)
            full.run_dir, full.stage = run_dir.path, stage
            raise full from exc
        raise
    return result


def _write_tables(run_dir: RunDir, tables: Mapping[str, Any]) -> dict[str, Any]:
    """The records as Parquet and a DuckDB file (with r3con[sql]); what was written, or why not, for the manifest."""
    from .tables import NEEDS_DUCKDB, write_tables

    try:
        written = write_tables(run_dir.path, tables)
    except Exception as exc:  # noqa: BLE001 - the tables are a convenience: records.json and the CSVs stand
        if is_disk_full(exc):
            raise
        return {"files": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
    if not written:
        return {"files": [], "error": f"Parquet and records.duckdb {NEEDS_DUCKDB}"}
    return {"files": [str(p.relative_to(run_dir.path)) for p in written]}


def fallback(stage: str, failed: BaseException | str, how: str) -> dict[str, str]:
    """What failed in `stage` (an error or what went wrong) and how the run went on without it, for the
    manifest, the result and a warning line."""
    return {"stage": stage, "failed": failed if isinstance(failed, str) else cause_of(failed), "fallback": how}


async def _fitting(selector: NotesSelector, task: str, choice: NotesChoice,
                   call: Callable[[str], Awaitable[T]]) -> T:
    """`call(notes)`; when the endpoint refuses it as too long for the window, again with half the notes."""
    async def fewer(budget: int) -> NotesChoice:
        return await selector.select(task, budget=budget)

    return await fitting(lambda chosen: call(chosen.text), choice, fewer)


def _finish_manifest(run_dir: RunDir, manifest: dict[str, Any], selections: Mapping[str, Selections],
                     seen: CacheSeen, placement: Placement) -> None:
    """The manifest again, with how many calls had their notes selected, and put them first, per stage,
    and whether the endpoint kept the documents' prefixes between stages."""
    manifest["notes_selection"]["calls"] = {stage: {"calls": s.calls, "selected": s.selected}
                                            for stage, s in selections.items() if s.calls}
    manifest["layout"]["shared_first_calls"] = {stage: s.shared_first for stage, s in selections.items()
                                                if s.shared_first or stage == "populate"}
    manifest["layout"]["document_reuse"] = seen.to_dict(placement.adaptive)
    run_dir.write_json("manifest.json", manifest)


def _record_end(run_dir: RunDir, stage: str, exc: BaseException, save: Callable[[], object]) -> None:
    """What ended the run, in error.json (with the traceback for our own bugs), and the usage and
    manifest so far; tags `exc` with the run folder and stage for the CLI. Never raises: the disk may
    be full, and the error that ended the run is the one to report."""
    if isinstance(exc, R3conError):
        kind = "error"
    elif isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
        kind = "interrupted"
    else:
        kind = "disk full" if is_disk_full(exc) else "internal error"
    record: dict[str, Any] = {"stage": stage, "kind": kind, "error": f"{type(exc).__name__}: {exc}"}
    if kind == "internal error":
        record["traceback"] = "".join(traceback.format_exception(exc))
    try:
        exc.run_dir = run_dir.path  # type: ignore[attr-defined]  # any exception takes attributes
        exc.stage = stage  # type: ignore[attr-defined]
    except AttributeError:
        pass
    try:
        run_dir.write_json("error.json", record)
        save()
    except OSError:
        pass


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


def _key_order(key: str) -> tuple[int, ...]:
    return tuple(int(p) for p in key.split("."))


def _notes_json(parts: Sequence[Document], notes: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each note with `refs`: the keys of the documents it names ("document 12"), for links."""
    keys = [p.key for p in parts]
    return [{"doc": p.key, "title": p.title, "note": notes[p.key],
             "refs": document_refs(notes[p.key], keys, own=p.key)} for p in parts if p.key in notes]


def _write_documents(run_dir: RunDir, docs: Sequence[Document]) -> None:
    """documents.jsonl: each whole document's text as loaded, which records' `_span`s index."""
    run_dir.write_text("documents.jsonl", "".join(
        json.dumps({"doc": d.number, "title": d.title, "source": d.source, "text": d.text}, ensure_ascii=False) + "\n"
        for d in docs))


def _write_usage(run_dir: RunDir, llm: LLMStack) -> None:
    total = llm.ledger.total().to_dict()
    total["by_stage"] = {k: v.to_dict() for k, v in llm.ledger.by_stage().items()}
    total["run_folder_cost_usd"] = spent_in(run_dir.calls_path)  # this attempt and earlier ones (--resume)
    run_dir.write_json("usage.json", total)
