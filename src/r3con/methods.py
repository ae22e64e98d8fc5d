"""Methods that answer a task over documents, by name: R3CON, its ablations and the baselines (r3con.baselines).

The eval harness runs any of them the same way, with the same client, accounting and artifacts.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .config import Settings
from .corpus import Document
from .errors import ConfigError
from .results import MethodFn, MethodOutcome


def _r3con_variant(**changes: Any) -> MethodFn:
    async def method(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        from .pipeline import run

        result = await run(task, documents, dataclasses.replace(settings, out_dir=run_dir, **changes))
        return MethodOutcome(answer=result.answer, usage=result.usage, by_stage=result.by_stage,
                             capped=result.capped, degraded=result.degraded, run_dir=result.run_dir,
                             model=result.model or None)

    return method


_METHODS: dict[str, MethodFn] = {
    "r3con": _r3con_variant(),
    "r3con-rounds0": _r3con_variant(rounds=0),
    "r3con-rounds1": _r3con_variant(rounds=1),
    "r3con-rounds3": _r3con_variant(rounds=3),
    "r3con-nostruct": _r3con_variant(structuring=False),
    "r3con-direct": _r3con_variant(reasoning="direct"),
}


_DESCRIPTIONS: dict[str, str] = {
    "r3con": "R3CON: relevance rounds (2), schema, per-document population, coding agent over the records",
    "r3con-rounds0": "R3CON ablation: no relevance notes (schema from the task alone), then population and the agent",
    "r3con-rounds1": "R3CON ablation: one relevance round (no cross-document re-reading)",
    "r3con-rounds3": "R3CON ablation: three relevance rounds",
    "r3con-nostruct": "R3CON ablation: no structuring; the coding agent works from the notes alone",
    "r3con-direct": "R3CON ablation: direct reasoning over notes and records in one call instead of the coding agent",
}


def register(name: str, fn: MethodFn, description: str = "") -> None:
    """Make a method available to `run_method` and `r3con eval run --method NAME`."""
    _METHODS[name] = fn
    if description:
        _DESCRIPTIONS[name] = description


def _all_methods() -> dict[str, MethodFn]:
    from .baselines import BASELINES  # imported here: the registry loads them when asked

    return {**BASELINES, **_METHODS}


def available_methods() -> list[str]:
    return sorted(_all_methods())


def describe_methods() -> dict[str, str]:
    """Every method's name and one line on what it does, sorted by name."""
    from .baselines import DESCRIPTIONS

    described = {**DESCRIPTIONS, **_DESCRIPTIONS}
    return {name: described.get(name, "") for name in available_methods()}


async def run_method(
    name: str, task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path
) -> MethodOutcome:
    """Run the method `name`; raises ConfigError for an unknown name."""
    try:
        fn = _all_methods()[name]
    except KeyError:
        raise ConfigError(f"unknown method {name!r}; choose one of {', '.join(available_methods())}") from None
    return await fn(task, documents, settings, run_dir)
