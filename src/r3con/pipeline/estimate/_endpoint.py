"""What a run would use and what a sample run said: the endpoint as `run` finds it, the documents a
`run --sample` takes, and its projection to the whole folder."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...config import Settings
from ...corpus.documents import Document
from ...errors import ConfigError
from ...llm.types import Usage
from ._figures import StageEstimate
from ._range import estimate_run


@dataclass(frozen=True)
class PlannedEndpoint:
    """The endpoint a run would use, found as `run` finds it: its model, window and concurrency, and whence."""

    base_url: str
    model: str
    context_window: int
    context_window_source: str
    concurrency: int
    concurrency_source: str

    def line(self) -> str:
        return (f"planned for {self.base_url}, model {self.model}: window {self.context_window:,} tokens "
                f"({self.context_window_source}), {self.concurrency} calls in flight ({self.concurrency_source})")

    def to_dict(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "model": self.model, "context_window": self.context_window,
                "context_window_source": self.context_window_source, "concurrency": self.concurrency,
                "concurrency_source": self.concurrency_source}


async def plan_endpoint(settings: Settings) -> PlannedEndpoint:
    """Open the endpoint as `run` opens it (`build_llm`: a pool, a router's workers, the server's slots and
    window) and say what it found; no chat call is made."""
    from dataclasses import replace as replaced

    from ...llm import build_llm

    async with build_llm(replaced(settings, cache=False, max_cost_usd=None)) as stack:
        info = stack.endpoint
        chosen = stack.concurrency or (0, "unknown")
        return PlannedEndpoint(info.base_url, info.model, info.context_window, info.context_window_source,
                               int(chosen[0]), str(chosen[1]))


def sample_documents(documents: Sequence[Document], spec: str) -> tuple[Document, ...]:
    """The documents a `--sample` run takes: N of them (or a share, "0.1"), those whose text has the lowest
    SHA-256, so the same files give the same sample whatever their names or order. They keep their numbers (a
    document is known by the same number in a sample and in the whole folder's run: reuse carries over)."""
    try:
        share = float(spec)
    except ValueError:
        share = -1.0
    if share <= 0 or (share >= 1 and not share.is_integer()):
        raise ConfigError(f"--sample {spec!r}: give a number of documents (5) or a share of them (0.1)")
    count = int(share) if share >= 1 else max(1, math.ceil(share * len(documents)))
    return tuple(sorted(sorted(documents, key=lambda d: d.sha256)[:count], key=lambda d: d.number))


@dataclass(frozen=True)
class Projection:
    """What a sample run cost beside the estimate for the whole folder, scaled by how the estimate did on the sample."""

    sampled: int
    documents: int
    sample_usage: Usage
    sample_estimate: StageEstimate
    whole_estimate: StageEstimate

    def lines(self) -> list[str]:
        ratio = self.sample_usage.calls / max(1, self.sample_estimate.calls)
        whole = self.whole_estimate
        cost = ("price unknown" if whole.cost_usd is None or self.sample_usage.known_cost is None else
                "free (local server)" if self.sample_usage.local_calls and not whole.cost_usd else
                f"${whole.cost_usd:.4f} estimated, ${self._scaled_cost():.4f} at the sample's cost against its estimate")
        return [f"sample: {self.sampled} of {self.documents} documents (those whose text has the lowest SHA-256: the "
                f"same files give the same sample): {self.sample_usage.calls:,} calls, "
                f"{self.sample_usage.prompt_tokens:,} prompt tokens, {self.sample_usage.cost_text()}",
                f"the whole folder ({self.documents} documents): about {whole.calls:,} calls "
                f"({round(whole.calls * ratio):,} at the sample's {ratio:.2f} calls per estimated call), "
                f"{whole.input_tokens:,} prompt tokens; {cost}"]

    def _scaled_cost(self) -> float:
        estimated = self.sample_estimate.cost_usd or 0.0
        whole = self.whole_estimate.cost_usd or 0.0
        return whole * (self.sample_usage.cost_usd / estimated) if estimated else whole

    def to_dict(self) -> dict[str, Any]:
        return {"sampled": self.sampled, "documents": self.documents, "sample_usage": self.sample_usage.to_dict(),
                "sample_estimate": self.sample_estimate.to_dict(), "whole_estimate": self.whole_estimate.to_dict()}


async def project(task: str, documents: Sequence[Document], sample: Sequence[Document], settings: Settings,
                  sample_usage: Usage, model: str) -> Projection:
    """The estimate for all `documents` beside what the run on `sample` of them cost (`settings` with the
    window the run used)."""
    whole = await estimate_run(task, documents, settings, model=model, ranged=False)
    part = await estimate_run(task, sample, settings, model=model, ranged=False)
    return Projection(len(sample), len(documents), sample_usage, part.total, whole.total)
