"""Frozen records shared by the stages, the pipeline's result and the methods (R3CON and the baselines)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .llm.types import Usage

if TYPE_CHECKING:
    from .config import Settings
    from .corpus.documents import Document


@dataclass(frozen=True)
class RunEnd:
    """How a run that raised ended (what `run(on_end=...)` is given): the error it raised, the run folder that
    keeps what was done, the stage it was in, and its report (or why none was written)."""

    error: BaseException
    run_dir: Path
    stage: str
    report: Path | None = None
    report_error: str | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """A document that a stage had to go on without (the run is degraded, not failed)."""

    stage: str
    doc: str
    error: str
    cause: str = ""  # what went wrong, short: "HTTP 500 from the endpoint: ...", "connection refused at ..."

    def to_dict(self) -> dict[str, str]:
        return {"doc": self.doc, "stage": self.stage, "error": self.error, "cause": self.cause or self.error}


@dataclass(frozen=True)
class MethodOutcome:
    """A method's answer and its cost."""

    answer: str
    usage: Usage
    by_stage: Mapping[str, Usage]
    capped: bool
    degraded: tuple[Failure, ...]
    run_dir: Path
    model: str | None = None  # the model the endpoint served, when the method knows it


MethodFn = Callable[[str, tuple["Document", ...], "Settings", Path], Awaitable[MethodOutcome]]
