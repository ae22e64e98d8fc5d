"""Frozen records shared by the stages and the pipeline's result."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Failure:
    """A document that a stage had to go on without (the run is degraded, not failed)."""

    stage: str
    doc: str
    error: str
    cause: str = ""  # what went wrong, short: "HTTP 500 from the endpoint: ...", "connection refused at ..."

    def to_dict(self) -> dict[str, str]:
        return {"doc": self.doc, "stage": self.stage, "error": self.error, "cause": self.cause or self.error}
