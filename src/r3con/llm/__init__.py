"""The LLM seam: one `complete(request) -> completion` interface, and the layers stacked around it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..config import STAGES, Settings
from ..errors import ConfigError
from .batch import Batched
from .budget import BudgetGuard, CostCap, check_prices, shared_cap, spent_in
from .cache import Cached, CallCache
from .client import OpenAIChat, request_headers
from .embeddings import Embedder, open_embedder
from .layers import Accounted, CallLog, ConcurrencyLimited, Ledger, Recorded, Replayed, StageModels
from .nearwindow import NearWindow, window_was_asked
from .output import OutputChecked
from .overflow import LearnedWindow, Overflows
from .pool import EndpointStats, Pooled, open_pool, pool_entries
from .pricing import Price, PriceTable
from .ratelimit import RateLimited
from .replay import FolderReplies, LoggedReplies
from .retry import Retrier, RetryBudget, Retrying, RetryPolicy
from .routers import through_router
from .slots import concurrency_for
from .types import LLM, ChatRequest, Completion, Message, Usage
from .window import EndpointInfo

__all__ = [
    "LLM", "ChatRequest", "Completion", "CostCap", "EndpointInfo", "EndpointStats", "LLMStack", "Ledger", "Message", "Price",
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
    cache: CallCache | None = None  # the LLM cache, for embeddings too
    replayed: Replayed | None = None  # earlier runs' replies to identical requests (`reuse`), above the cache
    pool: Pooled | None = None  # the endpoints of a pool (`--base-url` repeated or `--pool`), else None
    near_window: NearWindow | None = None  # counts prompts close to a window the server did not report
    window: LearnedWindow | None = None  # the window, as "too long" replies stated it (`overflow`)
    concurrency: tuple[int, str] | None = None  # requests in flight, and where the number came from (`slots`)

    @property
    def planning_window(self) -> int:
        """The window to plan parts and notes in: the endpoint's, or less when the server said so."""
        return self.endpoint.context_window if self.window is None else self.window.planning

    def endpoints(self) -> list[dict[str, object]]:
        """Per endpoint of a pool: calls, tokens, errors, time, documents served ([] for one endpoint)."""
        return [s.to_dict() for s in self.pool.stats()] if self.pool is not None else []

    def warnings(self) -> tuple[str, ...]:
        """What the run should warn about once it ends (prompts close to an unreported window)."""
        line = self.near_window.warning() if self.near_window is not None else None
        return (line,) if line else ()

    async def complete(self, request: ChatRequest) -> Completion:
        return await self.top.complete(request)

    def embedder(self, settings: Settings, stage: str) -> AbstractAsyncContextManager[Embedder | None]:
        """The configured embedder (None without an embedding model), sharing this run's ledger, log, retries and cap."""
        return open_embedder(settings, stage=stage, ledger=self.ledger, log=self.log, retrier=self.retrier,
                             cap=self.cost_cap, cache=self.cache)


@asynccontextmanager
async def build_llm(settings: Settings, calls_log: Path | None = None, *,
                    cap: CostCap | None = None) -> AsyncIterator[LLMStack]:
    """Open the endpoint, learn its model and window, and stack the layers.

    Top to bottom: stage models, call log, accounting, earlier runs' replies (`Replayed`), cache, a
    resumed folder's own replies (`FolderReplies`), output checks, retries, what "too long" replies teach
    of the window (`overflow`), rate and concurrency limits, the spending cap (only calls in flight
    reserve against it), the HTTP client.
    `cap`: a `CostCap` shared with other stacks (an evaluation's; or the one of an enclosing
    `budget.sharing(cap)`); without one, `--max-cost` makes one that counts what earlier attempts
    logged in `calls_log` (a resumed run folder).
    """
    entries = pool_entries(settings)
    pool: Pooled | None = None
    base: OpenAIChat | Pooled
    if entries:
        base = pool = await open_pool(settings, entries)  # each endpoint's window discovered as for one
    else:
        base = OpenAIChat(settings)
    closing = ExitStack()
    try:
        if isinstance(base, Pooled):
            endpoint = base.info()
            concurrency = (sum(s.concurrency for s in base.stats()), "pool: each endpoint's own")
        else:  # behind a router, the window is asked of its workers (`routers`)
            endpoint = await through_router(base.endpoint, settings, await base.describe(settings))
            concurrency = await concurrency_for(base.endpoint, settings)
        ledger = Ledger()
        prices = PriceTable.load(settings.prices_file, base_url=endpoint.base_url)
        stack: LLM = base
        cap = cap or shared_cap()
        if cap is None and settings.max_cost_usd is not None:
            cap = CostCap(settings.max_cost_usd, spent_before=spent_in(calls_log))
            if cap.spent_usd >= cap.limit_usd:
                raise ConfigError(
                    f"this run folder already spent ${cap.spent_usd:.4f}, which --max-cost ${cap.limit_usd:.4f} "
                    "does not exceed; raise --max-cost above what was spent to continue it")
        if cap is not None:
            check_prices(prices, [settings.model_for(s) or endpoint.model for s in STAGES])
        if settings.batch and isinstance(base, OpenAIChat):
            # --batch: calls gather into Batch API jobs, so no concurrency limit may hold them back; all of
            # a job's calls are in flight together, so all of them reserve
            stack = Batched(base, settings.out_dir / "batches.json", poll_s=settings.batch_poll_s,
                            concurrency=concurrency[0])
            if cap is not None:
                stack = BudgetGuard(stack, cap, prices, batch=True)
        else:
            if cap is not None:  # below the limit: only the calls actually in flight hold a reservation
                stack = BudgetGuard(stack, cap, prices)
            # a pool limits each endpoint on its own (`Pooled`); all of them together here
            stack = ConcurrencyLimited(stack, concurrency[0])
        stack = RateLimited(stack, rpm=settings.rpm, tpm=settings.tpm)
        window = LearnedWindow(endpoint.context_window)
        stack = Overflows(stack, window)
        budget = RetryBudget(settings.retry_budget)
        retrying = Retrying(stack, RetryPolicy(settings.retries, settings.retry_base_s, settings.retry_max_s, settings.max_call_s,
                                                settings.outage_s),
                            budget, base.base_url)
        stack = retrying
        stack = OutputChecked(stack, budget, max_tokens_cap=settings.max_tokens_cap)
        replies = LoggedReplies(calls_log)  # a resumed folder's answered calls: never paid twice, cache or not
        closing.callback(replies.close)
        if len(replies):
            stack = FolderReplies(stack, replies)
        cache: CallCache | None = None
        if settings.cache and settings.cache_path is not None:
            cache = CallCache(settings.cache_path)
            closing.callback(cache.close)
            stack = Cached(stack, cache, base.base_url)
        replayed = Replayed(stack)
        stack = replayed
        near: NearWindow | None = None
        if not window_was_asked(endpoint.context_window_source):
            stack = near = NearWindow(stack, ledger, endpoint)
        stack = Accounted(stack, ledger, prices)
        log = CallLog(calls_log, detail=settings.log_calls)
        closing.callback(log.close)
        stack = Recorded(stack, log)
        stack = StageModels(stack, settings.model_for, endpoint.model)
        yield LLMStack(top=stack, ledger=ledger, endpoint=endpoint, log=log, retrier=retrying.retrier, cost_cap=cap,
                       cache=cache, replayed=replayed, pool=pool, near_window=near, window=window,
                       concurrency=concurrency)
    finally:
        closing.close()
        await base.aclose()
