"""The R3CON pipeline: relevance rounds, schema, population, answer synthesis; artifacts as it goes."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..artifacts.folder import RunDir
from ..config import DEFAULT_CONCURRENCY, Settings
from ..corpus.documents import Document, FilesSeen, split_documents, split_documents_async, spool
from ..corpus.inputs import Inputs
from ..corpus.places import Parts
from ..corpus.spool import TextSpool
from ..corpus.store import CorpusStore, EmbeddingsSeen, Split
from ..engine import open_engine
from ..errors import ConfigError, InputError, OutputError
from ..evidence.citations import Evidence, EvidenceStats, resolve_citations, unsupported_in_answer
from ..llm import CostCap, EndpointInfo, EndpointView, LLMStack, build_llm
from ..llm.answered import Answered
from ..llm.local import local_ports, use_local_server
from ..llm.overflow import is_overflow
from ..llm.types import LLM, Usage
from ..notes.final import FinalNotes
from ..notes.selection import Embed, Selects
from ..report import try_write_report
from ..results import Failure, RunEnd
from ..sandbox import SandboxLimits
from ..stages.answer import AgentStep, AnswerOptions, AnswerResult, answer_direct, answer_with_code
from ..stages.fanout import DOCUMENT_ERRORS
from ..stages.plan import Placement
from ..stages.populate import PopulateOptions, RecordLimits, populate
from ..stages.relevance import RelevanceOptions, extract_relevance
from ..stages.schema import propose_schema, schema_text
from .budgets import Budgets, part_budget
from .memory import give_back
from .progress import NoProgress, Progress
from .watch import Watch, check_failures

__all__ = ["RunResult", "StageOptions", "part_budget", "run", "stage_options"]

@dataclass(frozen=True, repr=False)
class RunResult:
    """What a run produced: the answer and everything it was built from."""

    answer: str
    task: str
    documents: tuple[Document, ...]
    parts: tuple[Document, ...]
    notes: tuple[Mapping[str, str], ...]
    schema: Mapping[str, Any] | None
    records: Mapping[str, Sequence[Mapping[str, Any]]]  # per table, in corpus order (`SpooledRows`: read from disk)
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
        from ..report import summary_html

        return summary_html(self)

    def records_frame(self) -> dict[str, Any]:
        """The records as pandas DataFrames, one per record type (`r3con.artifacts.tables` names the columns)."""
        from ..artifacts.tables import frames

        return frames(self.records)

    def summary(self, *, lazy: bool = False) -> dict[str, Any]:
        """The JSON object `r3con run --json` prints. `lazy`: its parts per document (the inputs read, the evidence
        counts) made as they are written (`artifacts.folder.json_text`, `RunDir.write_json`), never all at once:
        at D = 100,000 they were tens of MB of dicts at the run's end."""
        usage = self.usage.to_dict()
        usage["by_stage"] = {stage: u.to_dict() for stage, u in self.by_stage.items()}
        return {
            "answer": self.answer,
            "run_dir": str(self.run_dir),
            "documents": len(self.documents),
            "degraded": [f.to_dict() for f in self.degraded],
            "capped": self.capped,
            "usage": usage,
            "inputs": self.inputs.to_dict(lazy=lazy),
            "evidence": [e.to_dict() for e in self.evidence],
            "unknown_citations": list(self.unknown_citations),
            "unsupported_numbers": list(self.unsupported_numbers),
            "evidence_stats": self.evidence_stats.to_dict(lazy=lazy) if self.evidence_stats else None,
            "fallbacks": [dict(f) for f in self.fallbacks],
            "reuse": dict(self.reuse) if self.reuse is not None else None,
            "corpus_store": dict(self.corpus_store) if self.corpus_store is not None else None,
            "warnings": list(self.warnings),
        }


def use_breakpoints(settings: Settings, endpoint: EndpointInfo) -> bool:
    """Anthropic-style cache breakpoints: on, off, or (auto) when the endpoint or model looks like Anthropic's."""
    if settings.cache_breakpoints != "auto":
        return settings.cache_breakpoints == "on"
    names = f"{endpoint.base_url} {endpoint.model} {settings.model or ''}".lower()
    return "anthropic" in names or "claude" in names


async def run(
    task: str, documents: Sequence[Document], settings: Settings, *,
    progress: Progress | None = None, llm: LLM | LLMStack | None = None, run_folder: Path | None = None,
    inputs: Inputs | None = None,
    cap: CostCap | None = None, on_end: Callable[[RunEnd], object] | None = None,
    store: CorpusStore | None = None, files: FilesSeen | None = None,
) -> RunResult:
    """Answer `task` over `documents` with R3CON; writes a run folder under `settings.out_dir`.

    `llm`: any object with the `LLM` protocol (`complete(request) -> completion`: a function-backed model,
    an in-process one), which r3con wraps in its own layers (the cache, retries, the budget, the call log)
    as it does the HTTP endpoint; or an `LLMStack` already built (shared by an evaluation). None: the
    endpoint the settings name.
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
    if resumed:
        run_dir.lock()  # before anything reads or writes the folder; a new run's is locked as it is made
    docs = tuple(documents)
    stored = _Stored(store, files, TextSpool())
    if isinstance(llm, LLMStack):
        parts = await stored.split(docs, Budgets.of(settings, llm.planning_window).part_tokens)
        return await _run_in(run_dir, resumed, task, docs, parts, settings, llm, progress or NoProgress(), inputs,
                             on_end=on_end, stored=stored)
    if llm is None:  # no endpoint named: the local server that answers on a usual port, as `r3con run` finds it
        settings = use_local_server(settings, local_ports(), required=False)[0]
    # --engine ray: the per-document calls go to Ray workers (`engine`); the stages are the same code
    async with open_engine(settings) as remote, build_llm(settings, calls_log=run_dir.calls_path, cap=cap, model=llm,
                                                          remote=remote) as stack:
        if resumed and stack.window is not None:  # the window the attempts before learned, not learned again
            stack.window.restore(run_dir.manifest().get("endpoint", {}).get("learned_window"))
        # the folder is made with its manifest (RunRecord), after the split and the content hashes: a run
        # killed while a large document is split or hashed leaves no empty folder
        parts = await stored.split(docs, Budgets.of(settings, stack.planning_window).part_tokens)
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
                            answered=llm.answered if own else None, stopped=stopped.append, stored=stored)
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
        run_dir.unlock()


def in_flight(settings: Settings) -> int | None:
    """Per-document calls a stage prepares at once: a few times what the endpoint takes, so prompts are
    built as slots free up and memory follows the calls in flight, not the corpus; a batch takes all."""
    return None if settings.batch else 4 * (settings.concurrency or DEFAULT_CONCURRENCY)  # unset: as for the default


@dataclass
class _Stored:
    """The corpus store a run reads through, and what it took from it: files (at load), parts, embeddings."""

    store: CorpusStore | None = None
    files: FilesSeen | None = None
    texts: TextSpool | None = None  # where the documents' and parts' texts are kept while the run reads them
    split_seen: Split | None = None
    embeddings: EmbeddingsSeen | None = None  # counted as the calls go

    async def split(self, docs: tuple[Document, ...], budget: int) -> tuple[Document, ...]:
        """The parts of `docs`: through the store when there is one (cuts and token counts kept by content),
        their texts and the documents' then spooled (`corpus.spool`): read back as the calls need them."""
        if self.store is None:
            parts = await split_documents_async(docs, budget)
        else:
            self.split_seen = self.store.split(docs, budget)
            parts = self.split_seen.parts
        if self.texts is not None:
            spool((*docs, *parts), self.texts)
            give_back()  # the texts' memory, now on disk
        return Parts(parts)  # their places by key made once, for what the run holds per part (`corpus.places`)

    async def resplit(self, docs: tuple[Document, ...], budget: int) -> tuple[Document, ...]:
        """The parts of `docs` for a smaller window learned mid-run (split here, as the store's cuts are for the
        window the run began with), spooled."""
        parts = await split_documents_async(docs, budget)
        if self.texts is not None:
            spool(parts, self.texts)
            give_back()
        return Parts(parts)

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
               embed: Embed | None = None, resumed: bool = False, answered: Answered | None = None,
               stopped: Callable[[str], object] = lambda stage: None, stored: _Stored | None = None) -> RunResult:
    """The method: relevance rounds, the final notes, a schema, population, the answer. What each stage
    produced goes to `watch` (the run folder's record, the reuse record, the progress display), which
    hears the stage a failure ended in too (and `stopped` with it)."""
    started = time.perf_counter()
    budgets = Budgets.of(settings, llm.planning_window)  # the endpoint's window, or less once a server said so
    options = stage_options(settings, budgets, breakpoints=use_breakpoints(settings, llm.endpoint), embed=embed,
                            scratch_root=run_dir.scratch_root)
    watch = Watch.open(run_dir, resumed, llm, settings, task, docs, parts, budgets, inputs, answered, progress,
                       embed=embed, breakpoints=options.relevance.breakpoints,
                       corpus_store=stored.to_dict if stored else lambda: None)
    watch.say(f"plan: {len(parts):,} parts of at most {budgets.part_tokens:,} tokens for a window of "
              f"{budgets.window:,}; " + (f"{llm.concurrency[0]} calls in flight ({llm.concurrency[1]})"
                                         if llm.concurrency is not None else "calls in flight as the endpoint takes them"))
    try:
        # --engine ray: the notes choices of the rounds and of population are made on the workers
        selects = llm.engine if isinstance(llm.engine, Selects) else None
        rounds, parts, options = await _relevance(watch, task, docs, parts, settings, llm, options, embed, run_dir,
                                                  selects, stored or _Stored())
        final_notes: Mapping[str, str] = rounds[-1] if rounds else MappingProxyType({})
        final = await FinalNotes.of(task, parts, final_notes, options.relevance.notes_budget, embed, selects)
        watch.final_notes(final)
        schema = await _schema(watch, task, final, settings) if settings.structuring else None
        tables: Mapping[str, Sequence[Mapping[str, Any]]] = MappingProxyType({})
        evidence_stats: EvidenceStats | None = None
        if schema is not None:
            tables, evidence_stats = await _populate(watch, task, schema, parts, final, final_notes, settings, options,
                                                     selects)
            final.populated()  # what only population's calls used is not held through the answer
            give_back()  # and the memory of it, with that of population's calls, goes back to the system
        answer_options = replace(options.answer, data_view_chars=min(  # the window as learned in any stage
            settings.data_view_chars, Budgets.of(settings, llm.planning_window).data_view_chars))
        answer = await _answer(watch, task, final, final_notes, schema, tables, answer_options, settings)
        give_back()  # the agent's data view and steps
        result = _result(task, docs, parts, rounds, schema, tables, answer, evidence_stats, llm.view, watch, stored,
                         time.perf_counter() - started, run_dir)
        watch.finish(result.answer, result.summary(lazy=True), schema)
    except BaseException as exc:
        ended = watch.failed(exc)
        stopped(watch.stage)
        if ended is not exc:
            raise ended from exc
        raise
    finally:
        watch.close()
    return result


async def _relevance(watch: Watch, task: str, docs: tuple[Document, ...], parts: tuple[Document, ...],
                     settings: Settings, llm: LLMStack, options: StageOptions, embed: Embed | None,
                     run_dir: RunDir, selects: Selects | None, stored: _Stored,
                     ) -> tuple[tuple[Mapping[str, str], ...], tuple[Document, ...], StageOptions]:
    """The relevance rounds: the notes of each round, the parts they were taken of, the options they ran
    with. A "too long" reply that states a smaller window has the parts and notes planned for it, and the
    rounds start again (what was answered before is served again, not paid)."""
    if settings.rounds <= 0:
        return (), parts, options
    window = llm.planning_window
    while True:
        watch.begin("relevance", len(parts) * settings.rounds)
        relevance = await extract_relevance(watch.ask("relevance"), task, parts, replace(
            options.relevance, keep=watch.note_keeper, top=watch.reuse.top, selects=selects), after_round=functools.partial(
                _after_round, docs=docs, parts=parts, window=window, settings=settings, learned=llm.view))
        if not relevance.stopped:
            break
        window = llm.planning_window
        budgets = Budgets.of(settings, window)
        parts = await stored.resplit(docs, budgets.part_tokens)
        options = stage_options(settings, budgets, breakpoints=options.relevance.breakpoints, embed=embed,
                                scratch_root=run_dir.scratch_root)
        watch.replanned(parts, budgets)
        llm.remember_answered()  # what this run was answered before the re-plan is not paid again
    watch.relevance(relevance, parts)
    return relevance.rounds, parts, options


async def _populate(watch: Watch, task: str, schema: Mapping[str, Any], parts: tuple[Document, ...],
                    final: FinalNotes, final_notes: Mapping[str, str], settings: Settings, options: StageOptions,
                    selects: Selects | None) -> tuple[Mapping[str, Sequence[Mapping[str, Any]]], EvidenceStats]:
    """Each document's records under `schema`, with the final notes as background."""
    watch.begin("populate", len(parts))
    filled = await populate(watch.ask("populate"), task, schema, parts, final, replace(
        options.populate, reverse=settings.rounds % 2 == 1, cache=watch.seen,
        keep=watch.records_keeper(final_notes), selects=selects))
    watch.records(filled, final_notes, schema)
    return filled.tables, filled.evidence


def _result(task: str, docs: tuple[Document, ...], parts: tuple[Document, ...], rounds: tuple[Mapping[str, str], ...],
            schema: Mapping[str, Any] | None, tables: Mapping[str, Sequence[Mapping[str, Any]]],
            answer: AnswerResult, evidence_stats: EvidenceStats | None, view: EndpointView, watch: Watch,
            stored: _Stored | None, elapsed_s: float, run_dir: RunDir) -> RunResult:
    """The run's result: the answer with what it cites resolved, and everything it was built from."""
    def rows() -> Iterator[Mapping[str, Any]]:  # each pass reads the records from disk again, one at a time
        return (r for table in tables.values() for r in table)

    texts = _Texts(docs)  # read back (`spool`) only for what the answer cites
    cited = resolve_citations(answer.citations, rows(), {d.number: d.title for d in docs}, texts)
    last = answer.steps[-1] if answer.mode == "code" and not answer.capped and answer.steps else None
    unsupported = unsupported_in_answer(
        answer.answer, task, cited, rows(), texts, outputs=[s.observation for s in answer.steps if s.observation
                                                          and s is not last],
        final_code=last.code if last is not None else None)
    return RunResult(
        answer=answer.answer, task=task, documents=docs, parts=parts, notes=rounds, schema=schema,
        records=tables, steps=answer.steps, capped=answer.capped, degraded=tuple(watch.record.failures),
        usage=view.usage(), by_stage=MappingProxyType(view.usage_by_stage()), run_dir=run_dir.path,
        elapsed_s=elapsed_s, model=view.endpoint.model, inputs=watch.record.degraded(),
        evidence=cited.evidence, unknown_citations=cited.unknown, evidence_stats=evidence_stats,
        fallbacks=tuple(watch.record.fallbacks), unsupported_numbers=unsupported, reuse=watch.reuse.summary(),
        corpus_store=stored.to_dict() if stored else None, warnings=view.warnings(),
    )


class _Texts(Mapping[int, str]):
    """The documents' texts by number, each read when asked for (a spooled text from disk), not all at once."""

    def __init__(self, docs: Sequence[Document]):
        self._docs = {d.number: d for d in docs}

    def __getitem__(self, number: int) -> str:
        return self._docs[number].text

    def __iter__(self) -> Iterator[int]:
        return iter(self._docs)

    def __len__(self) -> int:
        return len(self._docs)


@dataclass(frozen=True)
class StageOptions:
    """What each stage is given from the settings: one mapping, for the run and for `estimate`."""

    relevance: RelevanceOptions
    populate: PopulateOptions
    answer: AnswerOptions


def stage_options(settings: Settings, budgets: Budgets | int, *, breakpoints: bool = False,
                  embed: Embed | None = None, scratch_root: Path | None = None) -> StageOptions:
    """The stages' options for `settings` within `budgets` (or the budgets of a window of that many tokens)."""
    if isinstance(budgets, int):
        budgets = Budgets.of(settings, budgets)
    placement = Placement.of(settings)
    return StageOptions(
        relevance=RelevanceOptions(
            rounds=settings.rounds, max_tokens=budgets.note_tokens, temperature=settings.temperature,
            breakpoints=breakpoints, placement=placement, embed=embed, in_flight=in_flight(settings),
            notes_budget=budgets.notes_budget,
        ),
        populate=PopulateOptions(
            max_tokens=budgets.records_tokens, attempts=settings.populate_attempts,
            temperature=settings.temperature, breakpoints=breakpoints, placement=placement,
            unverified=settings.unverified, in_flight=in_flight(settings), limits=RecordLimits.of(settings),
        ),
        answer=AnswerOptions(
            mode=settings.reasoning, max_steps=settings.max_steps, max_tokens=budgets.answer_tokens,
            temperature=settings.temperature, data_view_chars=budgets.data_view_chars,
            sandbox_limits=SandboxLimits(timeout_s=settings.sandbox_timeout_s, memory_mb=settings.sandbox_memory_mb),
            sandbox_mode=settings.sandbox_mode, scratch_root=scratch_root,
        ),
    )


async def _schema(watch: Watch, task: str, final: FinalNotes, settings: Settings) -> Mapping[str, Any] | None:
    """The schema: an earlier run's, kept (`--reuse approximate`), or one proposed from the final notes; None
    when none was usable (the answer then comes from the notes alone)."""
    watch.begin("schema", 1)
    kept = watch.kept_schema()
    if kept is not None:
        return kept
    try:
        proposal = await final.fit(lambda notes: propose_schema(
            watch.ask("schema"), task, notes, max_attempts=settings.schema_attempts, temperature=settings.temperature))
    except OutputError as exc:
        watch.went_on("schema", exc, "answered directly from the notes, without records")
        return None
    else:
        watch.schema(proposal)
        return proposal.schema
    finally:
        watch.advance("schema")


async def _answer(watch: Watch, task: str, final: FinalNotes, final_notes: Mapping[str, str],
                  schema: Mapping[str, Any] | None, tables: Mapping[str, Sequence[Mapping[str, Any]]],
                  options: AnswerOptions, settings: Settings) -> AnswerResult:
    """The answer: by the coding agent over the records, or directly from the notes and records when
    reasoning is direct, an earlier stage fell back, or the agent failed or gave no answer."""
    watch.begin("reason", 1)
    llm = watch.ask("reason")
    missing = sorted({f.doc for f in watch.record.failures}, key=_key_order)
    schema_json = schema_text(schema) if schema else "(no schema: structuring was skipped)"
    answer: AnswerResult | None = None
    if settings.reasoning == "code" and not watch.record.fallbacks:
        try:
            answer = await final.fit(lambda notes: answer_with_code(
                llm, task, final_notes, notes, schema_json, tables, options, missing))
        except DOCUMENT_ERRORS as exc:  # the agent's calls broke: answer from the notes and the data
            watch.went_on("reason", exc, "answered directly from the notes and the records")
        else:
            if answer.capped and not answer.answer.strip():
                watch.went_on("reason", f"the agent gave no answer in {settings.max_steps} steps",
                              "answered directly from the notes and the records")
                answer = None
    if answer is None:
        answer = await final.fit(lambda notes: answer_direct(llm, task, notes, schema_json, tables, options, missing))
    watch.advance("reason")
    watch.answer(answer, settings.sandbox_mode)
    return answer


def _after_round(failed: Sequence[Failure], docs: Sequence[Document], parts: Sequence[Document], window: int,
                 settings: Settings, learned: EndpointView) -> bool:
    """After a relevance round: True when a "too long" reply taught a smaller window that changes the
    parts or cost a document its note (the rounds are planned again); RunFailed when more than
    --max-failed-share of the documents failed in it, before the next round spends anything."""
    give_back()  # the memory of the round's prompts and replies
    smaller = learned.planning_window
    if smaller < window and (any(is_overflow(f"{f.error} {f.cause}") for f in failed)
                             or split_documents(docs, Budgets.of(settings, smaller).part_tokens) != tuple(parts)):
        return True
    check_failures("relevance", failed, docs, settings)
    return False


def _key_order(key: str) -> tuple[int, ...]:
    return tuple(int(p) for p in key.split("."))
