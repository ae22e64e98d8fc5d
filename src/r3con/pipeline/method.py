"""The R3CON method: relevance rounds, schema, population, answer synthesis; artifacts and events as it goes."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..artifacts.folder import RunDir
from ..config import Settings
from ..corpus.documents import Document, split_documents
from ..corpus.inputs import Inputs
from ..corpus.spool import TextSpool
from ..engine import open_engine
from ..errors import ConfigError, InputError, OutputError
from ..evidence.citations import EvidenceStats
from ..llm import CostCap, EndpointInfo, LLMStack, Wrap, build_llm
from ..llm.discovery.local import local_ports, use_local_server
from ..llm.layers.answered import Answered
from ..llm.layers.overflow import is_overflow
from ..llm.types import LLM
from ..notes.final import FinalNotes
from ..notes.selection import Embed, Selects
from ..report import try_write_report
from ..results import Failure, RunEnd
from ..stages.answer import AnswerResult, answer_direct, answer_with_code
from ..stages.fanout import DOCUMENT_ERRORS
from ..stages.populate import populate
from ..stages.relevance import extract_relevance
from ..stages.schema import propose_schema, schema_text
from .budgets import Budgets, StageOptions, part_budget, stage_options
from .events import Emit, Event
from .job import Job, StoreUse
from .memory import give_back
from .planned import make_plan
from .result import Made, RunResult, result_of
from .watch import Watch, check_failures

__all__ = ["RunResult", "StageOptions", "StoreUse", "part_budget", "run", "stage_options"]


def use_breakpoints(settings: Settings, endpoint: EndpointInfo) -> bool:
    """Anthropic-style cache breakpoints: on, off, or (auto) when the endpoint or model looks like Anthropic's."""
    if settings.cache_breakpoints != "auto":
        return settings.cache_breakpoints == "on"
    names = f"{endpoint.base_url} {endpoint.model} {settings.model or ''}".lower()
    return "anthropic" in names or "claude" in names


async def run(
    task: str, documents: Sequence[Document], settings: Settings, *,
    llm: LLM | LLMStack | None = None, events: Emit | None = None, run_folder: Path | None = None,
    inputs: Inputs | None = None, cap: CostCap | None = None, on_end: Callable[[RunEnd], object] | None = None,
    store: StoreUse | None = None, layers: Sequence[Wrap] = (),
) -> RunResult:
    """Answer `task` over `documents` with R3CON; writes a run folder under `settings.out_dir`.

    (One of the few functions with ten parameters: it is the library's entry point, and each is a thing
    a caller hands in; `r3con.start` is the way to hold a run, this is what it runs.)

    `llm`: any object with the `LLM` protocol (`complete(request) -> completion`: a function-backed model,
    an in-process one), which r3con wraps in its own layers (the cache, retries, the budget, the call log)
    as it does the HTTP endpoint; or an `LLMStack` already built (shared by an evaluation). None: the
    endpoint the settings name.
    `events`: told every event of the run as it happens (`pipeline.events`), the plan first.
    `run_folder`: an existing run folder to continue in (`--resume`); with the LLM cache, every call that
    had succeeded there costs nothing again, and `--max-cost` counts what its earlier attempts paid.
    `inputs`: the account of the files the documents came from (`load_corpus`); the run adds parts and
    degraded documents to it.
    `cap`: a spending cap shared with other runs (instead of one from `settings.max_cost_usd`).
    `on_end`: called, before the error propagates, with how a run that raises ended (its run folder, stage
    and report); the error itself is raised as it was (see errors.py).
    `store`: the corpus store the documents were loaded through and what it reused of them; parts, token
    counts and embeddings come from it where it holds them, and the manifest says so.
    `layers`: layers of your own in the LLM stack (`r3con.llm.Wrapper` subclasses), just below the request's
    shaping, so they see each request as it is sent and every reply.
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
    stored = store or StoreUse()
    if stored.texts is None:
        stored = replace(stored, texts=TextSpool())
    job = Job(task, tuple(documents), settings, run_dir, resumed, inputs, events or _ignore, stored,
              wants_plan=events is not None)
    if isinstance(llm, LLMStack):
        return await _Method.run_in(job, llm, on_end=on_end)
    if llm is None:  # no endpoint named: the local server that answers on a usual port, as `r3con run` finds it
        job = replace(job, settings=use_local_server(settings, local_ports(), required=False)[0])
    # --engine ray: the per-document calls go to Ray workers (`engine`); the stages are the same code
    async with open_engine(job.settings, log=run_dir.ray_log_path) as remote, build_llm(
            job.settings, calls_log=run_dir.calls_path, cap=cap, model=llm, remote=remote, layers=layers) as stack:
        if resumed and stack.window is not None:  # the window the attempts before learned, not learned again
            stack.window.restore(run_dir.manifest().get("endpoint", {}).get("learned_window"))
        if notes_ranking(job.settings) != "embeddings":
            return await _Method.run_in(job, stack, own=True, on_end=on_end)
        async with stack.embedder(job.settings, "relevance") as embedder:
            embed = stored.embedder(embedder.embed, job.settings.embedding_model) if embedder is not None else None
            return await _Method.run_in(job, stack, embed=embed, own=True, on_end=on_end)


def _ignore(event: Event) -> None:
    pass


def notes_ranking(settings: Settings) -> str:
    """How notes are ranked when they exceed the budget: bm25, or embeddings (needs --embedding-model)."""
    if settings.notes_ranking == "embeddings" and not settings.embedding_model:
        raise ConfigError("--notes-ranking embeddings needs an embeddings model: pass --embedding-model")
    if settings.notes_ranking == "auto":
        return "embeddings" if settings.embedding_model else "bm25"
    return settings.notes_ranking


class _Method:
    """One run of the method over `job` with `llm`: relevance rounds, the final notes, a schema, population,
    the answer. What each stage produced goes to `watch` (the run folder's record, the reuse record, the
    events), which hears the stage a failure ended in too."""

    def __init__(self, job: Job, llm: LLMStack, parts: tuple[Document, ...], embed: Embed | None,
                 answered: Answered | None):
        self.job, self.llm, self.parts, self.embed = job, llm, parts, embed
        self.settings = job.settings
        budgets = self.budgets()
        self.options = stage_options(self.settings, budgets, breakpoints=use_breakpoints(self.settings, llm.endpoint),
                                     embed=embed, scratch_root=job.run_dir.scratch_root)
        self.watch = Watch.open(job, llm, parts, budgets, answered, embed=embed,
                                breakpoints=self.options.relevance.breakpoints)
        # --engine ray: the notes choices of the rounds and of population are made on the workers
        self.selects = llm.engine if isinstance(llm.engine, Selects) else None

    def budgets(self) -> Budgets:
        """The budgets of the window as the run knows it now (the endpoint's, or less once a server said so)."""
        return Budgets.of(self.settings, self.llm.planning_window)

    @classmethod
    async def run_in(cls, job: Job, llm: LLMStack, *, embed: Embed | None = None, own: bool = False,
                     on_end: Callable[[RunEnd], object] | None = None) -> RunResult:
        """The method in `job.run_dir`; then the report is written (for a failed run too, with what the folder
        holds) and the folder made private, or the folder is removed if a new run made no call in it."""
        run_dir = job.run_dir
        method: _Method | None = None
        try:
            # the folder is made with its manifest (RunRecord), after the split and the content hashes: a run
            # killed while a large document is split or hashed leaves no empty folder
            parts = await job.store.split(job.docs, Budgets.of(job.settings, llm.planning_window).part_tokens)
            plan = await make_plan(job.task, job.docs, parts, job.settings, llm) if job.wants_plan else None
            method = cls(job, llm, parts, embed, llm.answered if own else None)
            method.watch.started(plan)
            result = await method.method()
            path, problem = try_write_report(run_dir.path)
            return replace(result, report=path, report_error=problem)
        except BaseException as exc:
            used = llm.ledger.total()
            if not job.resumed and not (used.calls or used.cache_hits):
                run_dir.discard_if_unused()  # a start that failed before any LLM call leaves no folder
            path, problem = try_write_report(run_dir.path) if run_dir.path.is_dir() else (None, None)
            if method is not None and on_end is not None:
                on_end(RunEnd(exc, run_dir.path, method.watch.stage, path, problem))
            raise
        finally:
            run_dir.seal()
            run_dir.unlock()

    async def method(self) -> RunResult:
        started = time.perf_counter()
        watch, settings = self.watch, self.settings
        budgets = self.budgets()
        concurrency = self.llm.concurrency
        watch.say(f"plan: {len(self.parts):,} parts of at most {budgets.part_tokens:,} tokens for a window of "
                  f"{budgets.window:,}; " + (f"{concurrency[0]} {'call' if concurrency[0] == 1 else 'calls'} in flight ({concurrency[1]})"
                                             if concurrency is not None else "calls in flight as the endpoint takes them"))
        try:
            rounds = await self.relevance()
            final_notes: Mapping[str, str] = rounds[-1] if rounds else MappingProxyType({})
            final = await FinalNotes.of(self.job.task, self.parts, final_notes, self.options.relevance.notes_budget,
                                        self.embed, self.selects)
            watch.final_notes(final)
            schema = await self.schema(final) if settings.structuring else None
            tables: Mapping[str, Sequence[Mapping[str, Any]]] = MappingProxyType({})
            evidence_stats: EvidenceStats | None = None
            if schema is not None:
                tables, evidence_stats = await self.populate(schema, final, final_notes)
                final.populated()  # what only population's calls used is not held through the answer
                give_back()  # and the memory of it, with that of population's calls, goes back to the system
            answer = await self.answer(final, final_notes, schema, tables)
            give_back()  # the agent's data view and steps
            made = Made(self.job.task, self.job.docs, self.parts, rounds, schema, tables, answer, evidence_stats)
            result = result_of(made, self.llm.view, self.job.run_dir.path, time.perf_counter() - started,
                               **watch.result_fields(self.job.store.to_dict()))
            watch.finish(result.answer, result.summary(lazy=True), schema)
        except BaseException as exc:
            ended = watch.failed(exc)
            if ended is not exc:
                raise ended from exc
            raise
        finally:
            watch.close()
        return result

    async def relevance(self) -> tuple[Mapping[str, str], ...]:
        """The relevance rounds: the notes of each round. A "too long" reply that states a smaller window has
        the parts and notes planned for it, and the rounds start again (what was answered before is served
        again, not paid)."""
        settings, watch = self.settings, self.watch
        if settings.rounds <= 0:
            return ()
        while True:
            window = self.llm.planning_window
            watch.begin("relevance", len(self.parts) * settings.rounds)
            relevance = await extract_relevance(watch.ask("relevance"), self.job.task, self.parts, replace(
                self.options.relevance, keep=watch.note_keeper, top=watch.reuse.top, selects=self.selects,
                on_note=watch.note, streams=self.llm.concurrency[0] if self.llm.concurrency else 1),
                after_round=functools.partial(self._after_round, window=window))
            if not relevance.stopped:
                break
            budgets = self.budgets()
            self.parts = await self.job.store.resplit(self.job.docs, budgets.part_tokens)
            self.options = stage_options(settings, budgets, breakpoints=self.options.relevance.breakpoints,
                                         embed=self.embed, scratch_root=self.job.run_dir.scratch_root)
            watch.replanned(self.parts, budgets)
            self.llm.remember_answered()  # what this run was answered before the re-plan is not paid again
        watch.relevance(relevance, self.parts)
        return relevance.rounds

    def _after_round(self, failed: Sequence[Failure], *, window: int) -> bool:
        """After a relevance round: True when a "too long" reply taught a smaller window that changes the
        parts or cost a document its note (the rounds are planned again); RunFailed when more than
        --max-failed-share of the documents failed in it, before the next round spends anything."""
        give_back()  # the memory of the round's prompts and replies
        smaller = self.llm.planning_window
        if smaller < window and (any(is_overflow(f"{f.error} {f.cause}") for f in failed) or split_documents(
                self.job.docs, Budgets.of(self.settings, smaller).part_tokens) != tuple(self.parts)):
            return True
        check_failures("relevance", failed, self.job.docs, self.settings)
        return False

    async def schema(self, final: FinalNotes) -> Mapping[str, Any] | None:
        """The schema: an earlier run's, kept (`--reuse approximate`), or one proposed from the final notes; None
        when none was usable (the answer then comes from the notes alone)."""
        watch = self.watch
        watch.begin("schema", 1)
        kept = watch.kept_schema()
        if kept is not None:
            return kept
        try:
            proposal = await final.fit(lambda notes: propose_schema(
                watch.ask("schema"), self.job.task, notes, max_attempts=self.settings.schema_attempts,
                temperature=self.settings.temperature))
        except OutputError as exc:
            watch.went_on("schema", exc, "answered directly from the notes, without records")
            return None
        else:
            watch.schema(proposal)
            return proposal.schema
        finally:
            watch.advance("schema")

    async def populate(self, schema: Mapping[str, Any], final: FinalNotes, final_notes: Mapping[str, str],
                       ) -> tuple[Mapping[str, Sequence[Mapping[str, Any]]], EvidenceStats]:
        """Each document's records under `schema`, with the final notes as background."""
        watch = self.watch
        watch.begin("populate", len(self.parts))
        filled = await populate(watch.ask("populate"), self.job.task, schema, self.parts, final, replace(
            self.options.populate, reverse=self.settings.rounds % 2 == 1, cache=watch.seen,
            keep=watch.records_keeper(final_notes), selects=self.selects))
        watch.records(filled, final_notes, schema)
        return filled.tables, filled.evidence

    async def answer(self, final: FinalNotes, final_notes: Mapping[str, str], schema: Mapping[str, Any] | None,
                     tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> AnswerResult:
        """The answer: by the coding agent over the records, or directly from the notes and records when
        reasoning is direct, an earlier stage fell back, or the agent failed or gave no answer."""
        watch, settings, task = self.watch, self.settings, self.job.task
        options = replace(self.options.answer, data_view_chars=min(  # the window as learned in any stage
            settings.data_view_chars, self.budgets().data_view_chars))
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
            answer = await final.fit(lambda notes: answer_direct(llm, task, notes, schema_json, tables, options,
                                                                 missing))
        watch.advance("reason")
        watch.answer(answer, settings.sandbox_mode)
        return answer


def _key_order(key: str) -> tuple[int, ...]:
    return tuple(int(p) for p in key.split("."))
