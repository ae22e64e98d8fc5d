"""What a run produced (`RunResult`), and how the method's outputs become it: the answer's citations resolved
against the records and documents, the numbers nothing cited states."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..corpus.documents import Document
from ..corpus.inputs import Inputs
from ..evidence.citations import Evidence, EvidenceStats, resolve_citations, unsupported_in_answer
from ..llm import EndpointView
from ..llm.types import Usage
from ..results import Failure
from ..stages.answer import AgentStep, AnswerResult

__all__ = ["Made", "RunResult", "result_of"]


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
        counts) made as they are written (`artifacts.folder.json_text`, `RunDir.write_json`), never all at once: for
        a large corpus, made whole they would be the run's peak memory at its end."""
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


@dataclass(frozen=True)
class Made:
    """What the method's stages made, for the result."""

    task: str
    docs: tuple[Document, ...]
    parts: tuple[Document, ...]
    rounds: tuple[Mapping[str, str], ...]
    schema: Mapping[str, Any] | None
    tables: Mapping[str, Sequence[Mapping[str, Any]]]
    answer: AnswerResult
    evidence_stats: EvidenceStats | None


def result_of(made: Made, view: EndpointView, run_dir: Path, elapsed_s: float, **extra: Any) -> RunResult:
    """The run's result: the answer with what it cites resolved, and everything it was built from; `extra`:
    the result's fields the run's record keeps (degraded, inputs, fallbacks, reuse, corpus_store)."""
    tables, answer, docs = made.tables, made.answer, made.docs

    def rows() -> Iterator[Mapping[str, Any]]:  # each pass reads the records from disk again, one at a time
        return (r for table in tables.values() for r in table)

    texts = _Texts(docs)  # read back (`spool`) only for what the answer cites
    cited = resolve_citations(answer.citations, rows(), {d.number: d.title for d in docs}, texts)
    last = answer.steps[-1] if answer.mode == "code" and not answer.capped and answer.steps else None
    unsupported = unsupported_in_answer(
        answer.answer, made.task, cited, rows(), texts, outputs=[s.observation for s in answer.steps if s.observation
                                                               and s is not last],
        final_code=last.code if last is not None else None)
    return RunResult(
        answer=answer.answer, task=made.task, documents=docs, parts=made.parts, notes=made.rounds,
        schema=made.schema, records=tables, steps=answer.steps, capped=answer.capped,
        usage=view.usage(), by_stage=MappingProxyType(view.usage_by_stage()), run_dir=run_dir,
        elapsed_s=elapsed_s, model=view.endpoint.model, evidence=cited.evidence, unknown_citations=cited.unknown,
        evidence_stats=made.evidence_stats, unsupported_numbers=unsupported, warnings=view.warnings(), **extra,
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
