"""A run's plan, known before its first call: the documents and parts, the window and slots it plans for, and
the calls, tokens and cost per stage that `estimate` predicts for them.

The plan is made by `estimate`'s own code over the run's own settings and endpoint, so `run.plan` and
`r3con estimate --json` say the same thing of the same run."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..config import DEFAULT_CONTEXT_WINDOW, Settings
from ..corpus.documents import Document
from ..llm import LLMStack
from .budgets import Budgets
from .estimate import Estimate, PlannedEndpoint, estimate_run, plan_endpoint

__all__ = ["Plan", "endpoint_plan", "make_plan", "plan_for", "plan_of"]


@dataclass(frozen=True)
class Plan:
    """What a run is planned to be: its corpus as split, the endpoint and window, and the estimate."""

    documents: int
    parts: int
    part_tokens: int
    notes_budget: int | None
    endpoint: PlannedEndpoint | None  # None: planned for no endpoint (an estimate with none named or found)
    estimate: Estimate

    @property
    def window(self) -> int:
        return self.endpoint.context_window if self.endpoint is not None else 0

    @property
    def slots(self) -> int:
        return self.endpoint.concurrency if self.endpoint is not None else 0

    def calls(self) -> dict[str, int]:
        """The calls planned per stage."""
        return {s.stage: s.calls for s in self.estimate.stages}

    def to_dict(self) -> dict[str, Any]:
        """What `r3con estimate --json` prints (beside the account of the inputs)."""
        return {**self.estimate.to_dict(), "part_tokens": self.part_tokens, "notes_budget": self.notes_budget,
                "endpoint": self.endpoint.to_dict() if self.endpoint is not None else None}


def plan_of(estimate: Estimate, settings: Settings, endpoint: PlannedEndpoint | None, window: int) -> Plan:
    """The plan of `estimate`, made for `window` with `settings` on `endpoint`."""
    budgets = Budgets.of(settings, window)
    return Plan(documents=estimate.documents, parts=estimate.parts, part_tokens=budgets.part_tokens,
                notes_budget=budgets.notes_budget, endpoint=endpoint, estimate=estimate)


def planned_settings(settings: Settings, endpoint: PlannedEndpoint) -> Settings:
    """`settings` as a run on `endpoint` uses them: its model, window and slots where none is set."""
    return replace(settings, model=settings.model or endpoint.model,
                   context_window=settings.context_window or endpoint.context_window,
                   concurrency=settings.concurrency or endpoint.concurrency)


async def make_plan(task: str, docs: tuple[Document, ...], parts: tuple[Document, ...], settings: Settings,
                    stack: LLMStack) -> Plan:
    """The plan of a run about to make its first call through `stack`: the window it plans for (learned
    from an earlier run, if one was), its slots, and the estimate over its documents."""
    info, window = stack.endpoint, stack.planning_window
    slots = stack.concurrency or (0, "unknown")
    endpoint = PlannedEndpoint(info.base_url, info.model, window,
                               info.context_window_source if window == info.context_window else "learned",
                               int(slots[0]), str(slots[1]))
    planned = planned_settings(replace(settings, context_window=window), endpoint)
    estimate = await estimate_run(task, docs, planned, model=endpoint.model)
    if estimate.parts != len(parts):  # the estimate splits as the run does: a difference is our bug
        raise RuntimeError(f"the plan split {estimate.parts} parts where the run has {len(parts)}")
    return plan_of(estimate, planned, endpoint, window)


async def endpoint_plan(settings: Settings) -> tuple[PlannedEndpoint | None, Settings]:
    """The endpoint a run of `settings` would use, opened as the run opens it (None: none named), and the
    settings as a run plans with them (its model, window and slots where none is set)."""
    if not (settings.base_url or settings.pool_file is not None):
        return None, settings
    planned = await plan_endpoint(settings)
    return planned, planned_settings(settings, planned)


async def plan_for(task: str, documents: tuple[Document, ...], settings: Settings) -> Plan:
    """The plan `r3con estimate` gives for a run of `settings` over `documents` (no model call)."""
    planned, measured = await endpoint_plan(settings)
    estimate = await estimate_run(task, documents, measured)
    return plan_of(estimate, measured, planned, measured.context_window or DEFAULT_CONTEXT_WINDOW)
