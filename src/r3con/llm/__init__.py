"""The LLM seam: one `complete(request) -> completion` interface, and the layers stacked around it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Settings
from .batch import Batched
from .budget import BudgetGuard, CostCap
from .cache import Cached, CallCache
from .client import EndpointInfo, OpenAIChat, request_headers
from .embeddings import Embedder, open_embedder
from .layers import Accounted, CallLog, ConcurrencyLimited, Ledger, Recorded, StageModels
from .output import OutputChecked
from .pricing import Price, PriceTable
from .ratelimit import RateLimited
from .retry import Retrier, RetryBudget, Retrying, RetryPolicy
from .types import LLM, ChatRequest, Completion, Message, Usage

__all__ = [
    "LLM", "ChatRequest", "Completion", "EndpointInfo", "LLMStack", "Ledger", "Message", "Price",
    "PriceTable", "Usage", "build_llm", "request_headers",
]


@dataclass
class LLMStack:
    """The assembled client a run uses: call `complete`; read `ledger` and `endpoint`."""

    top: LLM
    ledger: Ledger
    endpoint: EndpointInfo
    log: CallLog = field(default_factory=lambda: CallLog(None))  # the run's calls.jsonl, for other clients too
    retrier: Retrier | None = None  # the run's retry policy and budget, for other clients too
    cost_cap: CostCap | None = None  # --max-cost, for other clients too

    async def complete(self, request: ChatRequest) -> Completion:
        return await self.top.complete(request)

    def embedder(self, settings: Settings, stage: str) -> AbstractAsyncContextManager[Embedder | None]:
        """The configured embedder (None without an embedding model), sharing this run's ledger, log, retries and cap."""
        return open_embedder(settings, stage=stage, ledger=self.ledger, log=self.log, retrier=self.retrier,
                             cap=self.cost_cap)


@asynccontextmanager
async def build_llm(settings: Settings, calls_log: Path | None = None) -> AsyncIterator[LLMStack]:
    """Open the endpoint, learn its model and window, and stack the layers.

    Top to bottom: stage models, call log, accounting, cache, output checks, retries, rate and
    concurrency limits, the HTTP client.
    """
    base = OpenAIChat(settings)
    closing = ExitStack()
    try:
        endpoint = await base.describe(settings)
        ledger = Ledger()
        prices = PriceTable.load(settings.prices_file)
        # --batch: calls gather into Batch API jobs, so no concurrency limit may hold them back
        stack: LLM = (Batched(base, settings.out_dir / "batches.json", poll_s=settings.batch_poll_s,
                              concurrency=settings.concurrency)
                      if settings.batch else ConcurrencyLimited(base, settings.concurrency))
        stack = RateLimited(stack, rpm=settings.rpm, tpm=settings.tpm)
        budget = RetryBudget(settings.retry_budget)
        retrying = Retrying(stack, RetryPolicy(settings.retries, settings.retry_base_s, settings.retry_max_s),
                            budget, base.base_url)
        stack = retrying
        cap: CostCap | None = None
        if settings.max_cost_usd is not None:
            cap = settings.cost_cap if isinstance(settings.cost_cap, CostCap) else CostCap(settings.max_cost_usd)
            stack = BudgetGuard(stack, cap, prices, batch=settings.batch)
        stack = OutputChecked(stack, budget, max_tokens_cap=settings.max_tokens_cap)
        if settings.cache and settings.cache_path is not None:
            cache = CallCache(settings.cache_path)
            closing.callback(cache.close)
            stack = Cached(stack, cache, base.base_url)
        stack = Accounted(stack, ledger, prices)
        log = CallLog(calls_log)
        closing.callback(log.close)
        stack = Recorded(stack, log)
        stack = StageModels(stack, settings.model_for, endpoint.model)
        yield LLMStack(top=stack, ledger=ledger, endpoint=endpoint, log=log, retrier=retrying.retrier, cost_cap=cap)
    finally:
        closing.close()
        await base.aclose()
