"""The compact HTML a notebook shows for a RunResult: the answer and its evidence, escaped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..evidence.citations import Evidence, EvidenceStats
from ._render import _environment


class Summarised(Protocol):
    """What the summary shows of a run's result (`pipeline.RunResult` is one)."""

    @property
    def answer(self) -> str: ...
    @property
    def evidence(self) -> Sequence[Evidence]: ...
    @property
    def evidence_stats(self) -> EvidenceStats | None: ...
    @property
    def records(self) -> Mapping[str, Sequence[Mapping[str, Any]]]: ...
    @property
    def report(self) -> Path | None: ...
    @property
    def unknown_citations(self) -> Sequence[str]: ...
    @property
    def documents(self) -> Sequence[object]: ...
    @property
    def usage(self) -> object: ...  # an llm.types.Usage


def summary_html(result: Summarised, limit: int = 10) -> str:
    """The answer, the evidence it cites (document, passage, whether found), the counts and the report's path."""
    stats = result.evidence_stats
    return _environment().get_template("summary.html.j2").render(
        result=result, evidence=result.evidence[:limit], more=max(0, len(result.evidence) - limit),
        stats=stats.line() if stats is not None else None,
        records=sum(len(rows) for rows in result.records.values()),
        report=result.report,
    )
