"""What watches a run as the method goes: the run folder's record, the reuse record and the run's events, as
one observer. The method (`pipeline.method`) tells it what each stage produced; it asks it for the client
the stages call and, under `--reuse approximate`, for what an earlier run of the question may keep. Whoever
follows the run (the CLI's progress display, the app, traces) reads the events it emits."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..config import Settings
from ..corpus.documents import Document
from ..llm import EndpointView, LLMStack
from ..llm.layers.accounting import Progressed
from ..llm.layers.answered import Answered
from ..llm.types import LLM
from ..notes.final import FinalNotes
from ..notes.selection import Embed
from ..results import Failure
from ..stages.answer import AnswerResult
from ..stages.fanout import check_failed_share
from ..stages.plan import CacheSeen, Placement
from ..stages.populate import PopulateResult
from ..stages.relevance import RelevanceResult
from ..stages.schema import SchemaResult
from .budgets import Budgets
from .events import (
    Degraded,
    Fallback,
    Message,
    NoteEvent,
    ProgressEvent,
    RecordsEvent,
    Replanned,
    StageEvent,
    Started,
    UsageEvent,
    WarningEvent,
    call_event,
)
from .job import Job
from .record import RunRecord
from .reuse import Reuse, Tables


@dataclass
class Watch:
    """The record, the reuse record and the events of one run (`open`), each told what it keeps."""

    record: RunRecord
    reuse: Reuse
    job: Job
    llm: LLM  # the client the stages call: the run's, answering an earlier run's identical requests
    view: EndpointView
    _stages: dict[str, list[int]] = field(default_factory=dict)  # per stage begun: done, total
    _stage: str | None = None

    @classmethod
    def open(cls, job: Job, stack: LLMStack, parts: Sequence[Document], budgets: Budgets,
             answered: Answered | None, *, embed: Embed | None, breakpoints: bool) -> Watch:
        settings = job.settings
        reuse = Reuse.open(settings.reuse, settings.cache_path if settings.cache else None, job.task, settings,
                           job.run_dir.path, parts, new_schema=settings.new_schema)
        record = RunRecord(job, stack.view, parts, budgets, ranking="embeddings" if embed else "bm25",
                           breakpoints=breakpoints, placement=Placement.of(settings))
        emit = job.emit
        stack.view.listen(lambda total: emit(UsageEvent(usage=total.to_dict())), lambda line: emit(Message(text=line)))
        stack.log.listeners.append(lambda logged: emit(call_event(logged)))  # one event a line of calls.jsonl
        return cls(record, reuse, job, reuse.bind(stack, answered), stack.view)

    @property
    def settings(self) -> Settings:
        return self.job.settings

    @property
    def docs(self) -> tuple[Document, ...]:
        return self.job.docs

    @property
    def stage(self) -> str:
        """The stage the run is in (the one a failure ended)."""
        return self.record.stage

    # what the method asks

    def ask(self, stage: str) -> LLM:
        """The client `stage` calls: each document's first call advances the stage's progress."""
        self.record.stage = stage
        return Progressed(self.llm, self.advance)

    def started(self, plan: Any) -> None:
        """The run has its folder and plan (None: nobody follows the run, so none was made)."""
        job = self.job
        job.emit(Started(question=job.task, run_dir=str(job.run_dir.path), plan=plan, resumed=job.resumed))

    def begin(self, name: str, total: int) -> None:
        """Stage `name` begins, with `total` units of work (documents, rounds, parts); the one before ends."""
        self.record.stage = name
        self._end_stage()
        self._stage, self._stages[name] = name, [0, total]
        self.job.emit(StageEvent(stage=name, state="started", total=total))

    def advance(self, name: str) -> None:
        """One unit of stage `name` finished."""
        counts = self._stages.setdefault(name, [0, 0])
        counts[0] += 1
        self.job.emit(ProgressEvent(stage=name, done=counts[0], total=counts[1]))

    def _end_stage(self) -> None:
        if self._stage is not None:
            done, total = self._stages[self._stage]
            self.job.emit(StageEvent(stage=self._stage, state="finished", total=total))
            self._stage = None

    def say(self, line: str) -> None:
        """A line for the person watching (the plan banner)."""
        self.job.emit(Message(text=line))

    def note(self, doc: Document, round_no: int, text: str) -> None:
        """A document's note of a round, as kept."""
        self.job.emit(NoteEvent(doc=doc.key, round=round_no, text=text))

    @property
    def note_keeper(self) -> Callable[[Document, int, Mapping[str, str] | None], str | None] | None:
        return self.reuse.note_keeper

    def records_keeper(self, final_notes: Mapping[str, str]) -> Callable[[Document], Tables | None] | None:
        return self.reuse.records_keeper(final_notes)

    def kept_schema(self) -> Mapping[str, Any] | None:
        """An earlier run's schema, kept (`--reuse approximate`), or None."""
        schema = self.reuse.schema()
        if schema is not None:
            self.record.kept_schema(schema)
        return schema

    @property
    def seen(self) -> CacheSeen:
        return self.record.seen

    # what the method tells

    def replanned(self, parts: Sequence[Document], budgets: Budgets) -> None:
        self.record.replanned(parts, budgets.part_tokens, budgets.notes_budget)
        self.reuse.replanned(parts)
        self.job.emit(Replanned(window=budgets.window, parts=len(parts), part_tokens=budgets.part_tokens))

    def relevance(self, result: RelevanceResult, parts: Sequence[Document]) -> None:
        self.record.relevance(result, parts)
        self.reuse.decide_relevance(result.rounds, result.shown, result.kept)
        self._degraded(result.failures)
        self._check("relevance")

    def final_notes(self, final: FinalNotes) -> None:
        self.record.final_notes(final)

    def schema(self, proposal: SchemaResult) -> None:
        self.record.schema(proposal)

    def went_on(self, stage: str, failed: BaseException | str, how: str) -> None:
        said = self.record.went_on(stage, failed, how)
        self.job.emit(Fallback(stage=stage, failed=said["failed"], fallback=how))

    def records(self, filled: PopulateResult, final_notes: Mapping[str, str], schema: Mapping[str, Any]) -> None:
        self.record.records(filled)
        self.reuse.decide_populate(filled, final_notes, schema)
        for doc, count in filled.per_doc.items():
            self.job.emit(RecordsEvent(doc=str(doc), count=int(count)))
        self._degraded(filled.failures)
        self._check("populate")

    def _degraded(self, failures: Sequence[Failure]) -> None:
        for failure in failures:
            self.job.emit(Degraded(doc=failure.doc, stage=failure.stage, error=failure.cause or failure.error))

    def result_fields(self, corpus_store: Mapping[str, Any] | None) -> dict[str, Any]:
        """What the run's record and reuse record keep for the result."""
        return {"degraded": tuple(self.record.failures), "inputs": self.record.degraded(),
                "fallbacks": tuple(self.record.fallbacks), "reuse": self.reuse.summary(),
                "corpus_store": corpus_store}

    def answer(self, answer: AnswerResult, sandbox_mode: str) -> None:
        self.record.answer(answer, sandbox_mode)

    def finish(self, answer: str, summary: Mapping[str, Any], schema: Mapping[str, Any] | None) -> None:
        """The run answered: `answer` and the result's `summary` to the folder, the run to the reuse record."""
        self._end_stage()
        for line in self.view.warnings():
            self.job.emit(WarningEvent(text=line))
        self.record.reuse(self.reuse.decisions.to_dict(), self.reuse.summary())
        self.record.finish(answer, summary)
        self.reuse.finish(schema)

    def failed(self, exc: BaseException) -> BaseException:
        """What ended the run, recorded; the error to raise."""
        return self.record.ended(exc)

    def close(self) -> None:
        self.reuse.close()

    def _check(self, stage: str) -> None:
        """RunFailed when more than --max-failed-share of the documents failed in `stage`."""
        check_failures(stage, self.record.failures, self.docs, self.settings)


def check_failures(stage: str, failures: Sequence[Failure], docs: Sequence[Document], settings: Settings) -> None:
    """RunFailed when more than --max-failed-share of the documents (not parts: a document fails with any of
    its parts) failed in `stage`."""
    whole = [replace(f, doc=f.doc.split(".")[0]) for f in failures if f.stage == stage]
    check_failed_share(stage, whole, len(docs), settings.max_failed_share)
