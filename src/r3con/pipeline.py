"""The R3CON pipeline: relevance rounds, schema, population, answer synthesis; artifacts as it goes."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ._fanout import DOCUMENT_ERRORS, check_failed_share
from .artifacts import RunDir
from .config import DEFAULT_CONCURRENCY, Settings
from .corpus import Document, FilesSeen, split_documents, split_documents_async
from .errors import ConfigError, InputError, OutputError
from .evidence import Evidence, EvidenceStats, resolve_citations, unsupported_in_answer
from .inputs import Inputs
from .llm import CostCap, LLMStack, build_llm
from .llm.layers import Progressed, Replayed
from .llm.overflow import is_overflow
from .llm.types import LLM, Usage
from .notes import Embed, FinalNotes
from .progress import NoProgress, Progress
from .recording import RunRecord
from .report import try_write_report
from .results import Failure, RunEnd
from .reuse import Reuse
from .sandbox import SandboxLimits
from .stages.answer import AgentStep, AnswerOptions, AnswerResult, answer_direct, answer_with_code
from .stages.plan import Placement
from .stages.populate import PopulateOptions, populate
from .stages.relevance import RelevanceOptions, extract_relevance
from .stages.schema import propose_schema, schema_text
from .store import CorpusStore, EmbeddingsSeen, Split

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
    unsupported_numbers: tuple[str, ...] = ()  # the answer's numbers that nothing it cites (or the agent's code) states
    evidence_stats: EvidenceStats | None = None  # records whose passages were found in their documents
    fallbacks: tuple[Mapping[str, str], ...] = ()  # what failed and how the run went on without it (`fallback`)
    report: Path | None = None  # the run folder's report.html
    report_error: str | None = None  # why there is no report.html, when writing it failed
    reuse: Mapping[str, Any] | None = None  # what came from earlier runs of the question (`reuse`), per stage
    corpus_store: Mapping[str, Any] | None = None  # what came from the corpus store (`store`), or None without one
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
            "unsupported_numbers": list(self.unsupported_numbers),
            "evidence_stats": self.evidence_stats.to_dict() if self.evidence_stats else None,
            "fallbacks": [dict(f) for f in self.fallbacks],
            "reuse": dict(self.reuse) if self.reuse is not None else None,
            "corpus_store": dict(self.corpus_store) if self.corpus_store is not None else None,
            "warnings": list(self.warnings),
        }


def reply_reserve(settings: Settings, context_window: int) -> int:
    """Tokens kept for a per-document call's reply: the larger of the relevance and population stages'
    reply budgets, but at most a quarter of the window (and at least 256)."""
    return min(max(settings.note_max_tokens, settings.populate_max_tokens), max(256, context_window // 4))


def prompt_reserve(context_window: int) -> int:
    """Tokens kept for a per-document call's instructions, task and tags: 1,500, or an eighth of a
    smaller window."""
    return min(_PROMPT_OVERHEAD, context_window // 8)


def part_budget(settings: Settings, context_window: int) -> int:
    """Tokens a document part may take: half of what the window leaves after the reply reserve and the
    instructions (the other half is for the notes), at least 256.

    At 2,048 / 4,096 / 8,192 / 32,768 tokens with the default reply budgets (notes 1,024, records 4,096):
    640 / 1,280 / 2,560 / 13,586 tokens.
    """
    if settings.part_tokens:
        return settings.part_tokens
    free = context_window - reply_reserve(settings, context_window) - prompt_reserve(context_window)
    return max(256, free // 2)


def data_view_limit(context_window: int) -> int:
    """Characters of the records the answer's prompt may show: about a quarter of the window (at some four
    characters a token), so that the records, the notes and the reply fit a small window together."""
    return context_window


def notes_budget(settings: Settings, context_window: int, part_tokens: int) -> int | None:
    """Tokens the other documents' notes may take in one call; None: no budget (every note in full).

    `--notes-budget 0` turns selection off (the paper's behaviour even if the window overflows); unset,
    it is what the window leaves after the largest document part, the reply reserve, the instructions
    and a margin (1,000 tokens, or a sixteenth of a smaller window), at least 256.
    """
    if settings.notes_budget_tokens == 0:
        return None
    if settings.notes_budget_tokens:
        return settings.notes_budget_tokens
    left = context_window - part_tokens - reply_reserve(settings, context_window) - prompt_reserve(context_window)
    return max(256, left - min(1000, context_window // 16))


def use_breakpoints(settings: Settings, stack: LLMStack) -> bool:
    """Anthropic-style cache breakpoints: on, off, or (auto) when the endpoint or model looks like Anthropic's."""
    if settings.cache_breakpoints != "auto":
        return settings.cache_breakpoints == "on"
    names = f"{stack.endpoint.base_url} {stack.endpoint.model} {settings.model or ''}".lower()
    return "anthropic" in names or "claude" in names


async def run(
    task: str, documents: Sequence[Document], settings: Settings, *,
    progress: Progress | None = None, llm: LLMStack | None = None, run_folder: Path | None = None,
    inputs: Inputs | None = None,
    cap: CostCap | None = None, on_end: Callable[[RunEnd], object] | None = None,
    store: CorpusStore | None = None, files: FilesSeen | None = None,
) -> RunResult:
    """Answer `task` over `documents` with R3CON; writes a run folder under `settings.out_dir`.

    `run_folder`: an existing run folder to continue in (`--resume`); with the LLM cache, every call that
    had succeeded there costs nothing again. `inputs`: the account of the files the documents came
    from (`load_corpus`); the run adds parts and degraded documents to it.
    had succeeded there costs nothing again, and `--max-cost` counts what its earlier attempts paid.
    `cap`: a spending cap shared with other runs (instead of one from `settings.max_cost_usd`).
    `on_end`: called, before the error propagates, with how a run that raises ended (its run folder, stage
    and report); the error itself is raised as it was (see errors.py).
    `store`: the corpus store the documents were loaded through (`files`: what it reused of them);
    parts, token counts and embeddings come from it where it holds them, and the manifest says so.
    The folder is created only once the endpoint answered; a start that fails before any LLM call
    leaves no folder behind.
    """
    if not task.strip():
        raise InputError("the question is empty; pass the question as the first argument")
    if not documents:
        raise InputError("no documents given; pass files, folders or globs")
    resumed = run_folder is not None
    run_dir = RunDir(Path(run_folder)) if run_folder is not None else RunDir.allocate(settings.out_dir, task)
    docs = tuple(documents)
    stored = _Stored(store, files)
    if llm is not None:
        parts = await stored.split(docs, part_budget(settings, llm.endpoint.context_window))
        return await _run_in(run_dir, resumed, task, docs, parts, settings, llm, progress or NoProgress(), inputs,
                             on_end=on_end, stored=stored)
    async with build_llm(settings, calls_log=run_dir.calls_path, cap=cap) as stack:
        # the folder is made with its manifest (RunRecord), after the split and the content hashes: a run
        # killed while a large document is split or hashed leaves no empty folder
        parts = await stored.split(docs, part_budget(settings, stack.endpoint.context_window))
        if notes_ranking(settings) != "embeddings":
            return await _run_in(run_dir, resumed, task, docs, parts, settings, stack, progress or NoProgress(), inputs,
                                 own=True, on_end=on_end, stored=stored)
        async with stack.embedder(settings, "relevance") as embedder:
            embed = stored.embedder(embedder.embed, settings.embedding_model) if embedder is not None else None
            return await _run_in(run_dir, resumed, task, docs, parts, settings, stack, progress or NoProgress(), inputs,
                                 embed=embed, own=True, on_end=on_end, stored=stored)


async def _run_in(run_dir: RunDir, resumed: bool, task: str, docs: tuple[Document, ...],
                  parts: tuple[Document, ...], settings: Settings, llm: LLMStack, progress: Progress,
                  inputs: Inputs | None, embed: Embed | None = None, own: bool = False,
                  on_end: Callable[[RunEnd], object] | None = None, stored: _Stored | None = None) -> RunResult:
    """`_run` in `run_dir`; then the report is written (for a failed run too, with what the folder holds)
    and the folder made private, or the folder is removed if a new run made no call in it."""
    stopped: list[str] = []  # the stage a run that raised was in (none if it raised before its record began)
    try:
        result = await _run(task, docs, parts, settings, llm, run_dir, progress, inputs, embed=embed, resumed=resumed,
                            replayed=llm.replayed if own else None, stopped=stopped.append, stored=stored)
        path, problem = try_write_report(run_dir.path)
        return replace(result, report=path, report_error=problem)
    except BaseException as exc:
        used = llm.ledger.total()
        if not resumed and not (used.calls or used.cache_hits):
            run_dir.discard_if_unused()  # a start that failed before any LLM call leaves no folder
        path, problem = try_write_report(run_dir.path) if run_dir.path.is_dir() else (None, None)
        if stopped and on_end is not None:
            on_end(RunEnd(exc, run_dir.path, stopped[-1], path, problem))
        raise
    finally:
        run_dir.seal()


def in_flight(settings: Settings) -> int | None:
    """Per-document calls a stage prepares at once: a few times what the endpoint takes, so prompts are
    built as slots free up and memory follows the calls in flight, not the corpus; a batch takes all."""
    return None if settings.batch else 4 * (settings.concurrency or DEFAULT_CONCURRENCY)  # unset: as for the default


@dataclass
class _Stored:
    """The corpus store a run reads through, and what it took from it: files (at load), parts, embeddings."""

    store: CorpusStore | None = None
    files: FilesSeen | None = None
    split_seen: Split | None = None
    embeddings: EmbeddingsSeen | None = None  # counted as the calls go

    async def split(self, docs: tuple[Document, ...], budget: int) -> tuple[Document, ...]:
        """The parts of `docs`: through the store when there is one (cuts and token counts kept by content)."""
        if self.store is None:
            return await split_documents_async(docs, budget)
        self.split_seen = self.store.split(docs, budget)
        return self.split_seen.parts

    def embedder(self, embed: Embed, model: str | None) -> Embed:
        """`embed`, keeping its vectors in the store when there is one."""
        if self.store is None:
            return embed
        embed, self.embeddings = self.store.embedder(embed, model or "")
        return embed

    def to_dict(self) -> dict[str, Any] | None:
        """What came from the store, for the manifest and `--json`; None without a store."""
        if self.store is None:
            return None
        return {"path": str(self.store.path), "files": self.files.to_dict() if self.files else None,
                "parts": self.split_seen.to_dict() if self.split_seen else None,
                "embeddings": self.embeddings.to_dict() if self.embeddings else None}


def notes_ranking(settings: Settings) -> str:
    """How notes are ranked when they exceed the budget: bm25, or embeddings (needs --embedding-model)."""
    if settings.notes_ranking == "embeddings" and not settings.embedding_model:
        raise ConfigError("--notes-ranking embeddings needs an embeddings model: pass --embedding-model")
    if settings.notes_ranking == "auto":
        return "embeddings" if settings.embedding_model else "bm25"
    return settings.notes_ranking


async def _run(task: str, docs: tuple[Document, ...], parts: tuple[Document, ...], settings: Settings,
               llm: LLMStack, run_dir: RunDir, progress: Progress, inputs: Inputs | None = None,
               embed: Embed | None = None, resumed: bool = False, replayed: Replayed | None = None,
               stopped: Callable[[str], object] = lambda stage: None, stored: _Stored | None = None) -> RunResult:
    """The method: relevance rounds, the final notes, a schema, population, the answer; each stage's
    outcome goes to the run folder's record as it comes (and `stopped` hears the stage a failure ended)."""
    started = time.perf_counter()
    window = llm.planning_window  # the endpoint's, or less once a "too long" reply said so
    part_tokens = part_budget(settings, window)
    options = stage_options(settings, window, breakpoints=use_breakpoints(settings, llm), embed=embed,
                            scratch_root=run_dir.scratch_root)
    reuse = Reuse.open(settings.reuse, settings.cache_path if settings.cache else None, task, settings,
                       run_dir.path, parts, new_schema=settings.new_schema)
    record = RunRecord(run_dir, resumed, llm, settings, task, docs, parts, part_tokens, inputs,
                       notes_budget=options.relevance.notes_budget, ranking="embeddings" if embed else "bm25",
                       breakpoints=options.relevance.breakpoints, placement=options.relevance.placement,
                       corpus_store=stored.to_dict if stored else lambda: None)
    llm.ledger.subscribe(lambda stage, usage: progress.usage(llm.ledger.total()))
    ask = reuse.bind(llm, replayed)  # the endpoint, or an earlier run's reply to the same request
    note = getattr(progress, "note", None)  # a Progress written before notes has none
    if llm.retrier is not None and note is not None:
        llm.retrier.subscribe(note)
    if note is not None and llm.concurrency is not None:  # the banner: what the run will ask the server for
        note(f"plan: {len(parts):,} parts of at most {part_tokens:,} tokens for a window of {window:,}; "
             f"{llm.concurrency[0]} calls in flight ({llm.concurrency[1]})")
    try:
        rounds: tuple[Mapping[str, str], ...] = ()
        if settings.rounds > 0:
            while True:
                progress.stage("relevance", len(parts) * settings.rounds)
                relevance = await extract_relevance(Progressed(ask, progress.advance), task, parts, replace(
                    options.relevance, keep=reuse.note_keeper), after_round=functools.partial(
                        _after_round, docs=docs, parts=parts, window=window, settings=settings, llm=llm))
                if not relevance.stopped:
                    break
                # a "too long" reply stated a smaller window: plan the parts and notes for it, and start
                # again (the calls that were answered are in the cache when it is on)
                window = llm.planning_window
                part_tokens = part_budget(settings, window)
                parts = await split_documents_async(docs, part_tokens)
                options = stage_options(settings, window, breakpoints=options.relevance.breakpoints, embed=embed,
                                        scratch_root=run_dir.scratch_root)
                record.replanned(parts, part_tokens, options.relevance.notes_budget)
            record.relevance(relevance, parts)
            rounds = relevance.rounds
            reuse.decide_relevance(rounds, relevance.shown, relevance.kept)
            _check_failures("relevance", record.failures, docs, settings)
        final_notes: Mapping[str, str] = rounds[-1] if rounds else MappingProxyType({})
        final = await FinalNotes.of(task, parts, final_notes, options.relevance.notes_budget, embed)
        record.final_notes(final)

        schema: Mapping[str, Any] | None = None
        tables: Mapping[str, tuple[Mapping[str, Any], ...]] = MappingProxyType({})
        evidence_stats: EvidenceStats | None = None
        if settings.structuring:
            record.stage = "schema"
            schema = reuse.schema()
            if schema is not None:
                record.kept_schema(schema)
            else:
                schema = await _schema(ask, task, final, settings, record, progress)
        if schema is not None:
            record.stage = "populate"
            progress.stage("populate", len(parts))
            filled = await populate(Progressed(ask, progress.advance), task, schema, parts, final.text, replace(
                options.populate, selector=final.selector, reverse=settings.rounds % 2 == 1, cache=record.seen,
                keep=reuse.records_keeper(final_notes)))
            record.records(filled)
            tables, evidence_stats = filled.tables, filled.evidence
            reuse.decide_populate(tables, filled.per_doc, filled.kept, final_notes)
            _check_failures("populate", record.failures, docs, settings)

        record.stage = "reason"
        progress.stage("reason", 1)
        answer_options = replace(options.answer, data_view_chars=min(  # the window as learned in any stage
            settings.data_view_chars, data_view_limit(llm.planning_window)))
        answer = await _answer(ask, task, final, final_notes, schema, tables, answer_options, settings, record)
        progress.advance("reason")
        record.answer(answer, settings.sandbox_mode)
        cited = resolve_citations(answer.citations, (r for rows in tables.values() for r in rows),
                                  {d.number: d.title for d in docs}, {d.number: d.text for d in docs})
        last = answer.steps[-1] if answer.mode == "code" and not answer.capped and answer.steps else None
        unsupported = unsupported_in_answer(
            answer.answer, task, cited, (r for rows in tables.values() for r in rows), {d.number: d.text for d in docs},
            outputs=[s.observation for s in answer.steps if s.observation and s is not last],
            final_code=last.code if last is not None else None)
        result = RunResult(
            answer=answer.answer, task=task, documents=docs, parts=parts, notes=rounds, schema=schema,
            records=tables, steps=answer.steps, capped=answer.capped, degraded=tuple(record.failures),
            usage=llm.ledger.total(), by_stage=MappingProxyType(llm.ledger.by_stage()), run_dir=run_dir.path,
            elapsed_s=time.perf_counter() - started, model=llm.endpoint.model, inputs=record.degraded(),
            evidence=cited.evidence, unknown_citations=cited.unknown, evidence_stats=evidence_stats,
            fallbacks=tuple(record.fallbacks), unsupported_numbers=unsupported, reuse=reuse.summary(),
            corpus_store=stored.to_dict() if stored else None,
            warnings=llm.warnings(),
        )
        record.reuse(reuse.decisions.to_dict(), reuse.summary())
        record.finish(result.answer, result.summary())
        reuse.finish(schema)
    except BaseException as exc:
        ended = record.ended(exc)
        stopped(record.stage)
        if ended is not exc:
            raise ended from exc
        raise
    finally:
        reuse.close()
    return result


@dataclass(frozen=True)
class StageOptions:
    """What each stage is given from the settings: one mapping, for the run and for `estimate`."""

    relevance: RelevanceOptions
    populate: PopulateOptions
    answer: AnswerOptions


def stage_options(settings: Settings, context_window: int, *, breakpoints: bool = False,
                  embed: Embed | None = None, scratch_root: Path | None = None) -> StageOptions:
    """The stages' options for `settings` on an endpoint with `context_window` tokens."""
    placement = Placement.of(settings)
    return StageOptions(
        relevance=RelevanceOptions(
            rounds=settings.rounds, max_tokens=min(settings.note_max_tokens, reply_reserve(settings, context_window)),
            temperature=settings.temperature,
            breakpoints=breakpoints, placement=placement, embed=embed, in_flight=in_flight(settings),
            notes_budget=notes_budget(settings, context_window, part_budget(settings, context_window)),
        ),
        populate=PopulateOptions(
            max_tokens=min(settings.populate_max_tokens, reply_reserve(settings, context_window)),
            attempts=settings.populate_attempts,
            temperature=settings.temperature, breakpoints=breakpoints, placement=placement,
            unverified=settings.unverified, in_flight=in_flight(settings),
        ),
        answer=AnswerOptions(
            mode=settings.reasoning, max_steps=settings.max_steps, max_tokens=settings.reason_max_tokens,
            temperature=settings.temperature,
            data_view_chars=min(settings.data_view_chars, data_view_limit(context_window)),
            sandbox_limits=SandboxLimits(timeout_s=settings.sandbox_timeout_s, memory_mb=settings.sandbox_memory_mb),
            sandbox_mode=settings.sandbox_mode, scratch_root=scratch_root,
        ),
    )


async def _schema(llm: LLM, task: str, final: FinalNotes, settings: Settings, record: RunRecord,
                  progress: Progress) -> Mapping[str, Any] | None:
    """A schema proposed from the final notes; None when none was usable (the answer then comes from the
    notes alone)."""
    progress.stage("schema", 1)
    try:
        proposal = await final.fit(lambda notes: propose_schema(
            llm, task, notes, max_attempts=settings.schema_attempts, temperature=settings.temperature))
    except OutputError as exc:
        record.went_on("schema", exc, "answered directly from the notes, without records")
        return None
    else:
        record.schema(proposal)
        return proposal.schema
    finally:
        progress.advance("schema")


async def _answer(llm: LLM, task: str, final: FinalNotes, final_notes: Mapping[str, str],
                  schema: Mapping[str, Any] | None, tables: Mapping[str, tuple[Mapping[str, Any], ...]],
                  options: AnswerOptions, settings: Settings, record: RunRecord) -> AnswerResult:
    """The answer: by the coding agent over the records, or directly from the notes and records when
    reasoning is direct, an earlier stage fell back, or the agent failed or gave no answer."""
    missing = sorted({f.doc for f in record.failures}, key=_key_order)
    schema_json = schema_text(schema) if schema else "(no schema: structuring was skipped)"
    if settings.reasoning == "code" and not record.fallbacks:
        try:
            answer = await final.fit(lambda notes: answer_with_code(
                llm, task, dict(final_notes), notes, schema_json, tables, options, missing))
        except DOCUMENT_ERRORS as exc:  # the agent's calls broke: answer from the notes and the data
            record.went_on("reason", exc, "answered directly from the notes and the records")
        else:
            if not (answer.capped and not answer.answer.strip()):
                return answer
            record.went_on("reason", f"the agent gave no answer in {settings.max_steps} steps",
                           "answered directly from the notes and the records")
    return await final.fit(lambda notes: answer_direct(llm, task, notes, schema_json, tables, options, missing))


def _check_failures(stage: str, failures: Sequence[Failure], docs: Sequence[Document], settings: Settings) -> None:
    """RunFailed when more than --max-failed-share of the documents (not parts: a document fails with
    any of its parts) failed in `stage`."""
    whole = [replace(f, doc=f.doc.split(".")[0]) for f in failures if f.stage == stage]
    check_failed_share(stage, whole, len(docs), settings.max_failed_share)


def _after_round(failed: Sequence[Failure], docs: Sequence[Document], parts: Sequence[Document], window: int,
                 settings: Settings, llm: LLMStack) -> bool:
    """After a relevance round: True when a "too long" reply taught a smaller window that changes the
    parts or cost a document its note (the rounds are planned again); RunFailed when more than
    --max-failed-share of the documents failed in it, before the next round spends anything."""
    learned = llm.planning_window
    if learned < window and (any(is_overflow(f"{f.error} {f.cause}") for f in failed)
                             or split_documents(docs, part_budget(settings, learned)) != tuple(parts)):
        return True
    _check_failures("relevance", failed, docs, settings)
    return False


def _key_order(key: str) -> tuple[int, ...]:
    return tuple(int(p) for p in key.split("."))
