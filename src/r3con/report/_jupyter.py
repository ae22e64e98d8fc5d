"""The compact HTML a notebook shows for a RunResult: the answer and its evidence, escaped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._render import _environment

if TYPE_CHECKING:
    from ..pipeline import RunResult


def summary_html(result: RunResult, limit: int = 10) -> str:
    """The answer, the evidence it cites (document, passage, whether found), the counts and the report's path."""
    stats = result.evidence_stats
    return _environment().get_template("summary.html.j2").render(
        result=result, evidence=result.evidence[:limit], more=max(0, len(result.evidence) - limit),
        stats=stats.line() if stats is not None else None,
        records=sum(len(rows) for rows in result.records.values()),
        report=result.report,
    )
