"""What watches a run as the method goes: the run folder's record, the reuse record and the progress display,
as one observer. The method (`pipeline._run`) tells it what each stage produced; it asks it for the client
the stages call and, under `--reuse approximate`, for what an earlier run of the question may keep."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..artifacts.folder import RunDir
from ..config import Settings
from ..corpus.documents import Document
from ..corpus.inputs import Inputs
from ..llm import LLMStack
from ..llm.answered import Answered
from ..llm.layers import Progressed
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
from .progress import Progress
from .record import RunRecord
from .reuse import Reuse, Tables


@dataclass
class Watch:
    """The record, the reuse record and the progress of one run (`open`), each told what it keeps."""

    record: RunRecord
    reuse: Reuse
    progress: Progress
    settings: Settings
    docs: tuple[Document, ...]
    llm: LLM  # the client the stages call: the run's, answering an earlier run's identical requests

    @classmethod
    def open(cls, run_dir: RunDir, resumed: bool, stack: LLMStack, settings: Settings, task: str,
             docs: tuple[Document, ...], parts: Sequence[Document], budgets: Budgets, inputs: Inputs | None,
             answered: Answered | None, progress: Progress, *, embed: Embed | None, breakpoints: bool,
             corpus_store: Callable[[], dict[str, Any] | None]) -> Watch:
        reuse = Reuse.open(settings.reuse, settings.cache_path if settings.cache else None, task, settings,
                           run_dir.path, parts, new_schema=settings.new_schema)
        record = RunRecord(run_dir, resumed, stack.view, settings, task, docs, parts, budgets.part_tokens, inputs,
                           notes_budget=budgets.notes_budget, ranking="embeddings" if embed else "bm25",
                           breakpoints=breakpoints, placement=Placement.of(settings), corpus_store=corpus_store)
        stack.view.listen(progress.usage, getattr(progress, "note", None))  # a Progress written before notes has none
        return cls(record, reuse, progress, settings, docs, reuse.bind(stack, answered))

    @property
    def stage(self) -> str:
        """The stage the run is in (the one a failure ended)."""
        return self.record.stage

    # what the method asks

    def ask(self, stage: str) -> LLM:
        """The client `stage` calls: each document's first call advances the progress display."""
        self.record.stage = stage
        return Progressed(self.llm, self.progress.advance)

    def begin(self, name: str, total: int) -> None:
        """Stage `name` begins, with `total` units of work (documents, rounds, parts)."""
        self.record.stage = name
        self.progress.stage(name, total)

    def advance(self, name: str) -> None:
        self.progress.advance(name)

    def say(self, line: str) -> None:
        """A line for the person watching (the plan banner), where the progress display takes notes."""
        note = getattr(self.progress, "note", None)  # a Progress written before notes has none
        if note is not None:
            note(line)

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

    def relevance(self, result: RelevanceResult, parts: Sequence[Document]) -> None:
        self.record.relevance(result, parts)
        self.reuse.decide_relevance(result.rounds, result.shown, result.kept)
        self._check("relevance")

    def final_notes(self, final: FinalNotes) -> None:
        self.record.final_notes(final)

    def schema(self, proposal: SchemaResult) -> None:
        self.record.schema(proposal)

    def went_on(self, stage: str, failed: BaseException | str, how: str) -> None:
        self.record.went_on(stage, failed, how)

    def records(self, filled: PopulateResult, final_notes: Mapping[str, str], schema: Mapping[str, Any]) -> None:
        self.record.records(filled)
        self.reuse.decide_populate(filled, final_notes, schema)
        self._check("populate")

    def answer(self, answer: AnswerResult, sandbox_mode: str) -> None:
        self.record.answer(answer, sandbox_mode)

    def finish(self, answer: str, summary: Mapping[str, Any], schema: Mapping[str, Any] | None) -> None:
        """The run answered: `answer` and the result's `summary` to the folder, the run to the reuse record."""
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
