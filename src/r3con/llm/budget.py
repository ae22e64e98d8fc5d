"""`--max-cost`: stop before a call could take the spend past the cap.

Before each call the guard prices its worst case (the estimated prompt plus `max_tokens` of output,
at the model's price) and raises BudgetExceeded if what was spent, what calls in flight may still
spend, and this call together could pass the cap. Once tripped it stays tripped, so the calls of a
stage stop together and the run ends cleanly; rerunning the same command resumes (answered calls
come from the response cache). One `CostCap` can be shared by many runs (an evaluation).
"""

from __future__ import annotations

import threading

from ..errors import BudgetExceeded, ConfigError
from ..tokens import estimate_tokens
from .pricing import Price, PriceTable
from .types import LLM, ChatRequest, Completion

DEFAULT_MAX_TOKENS = 4096  # assumed output bound of a request that sets none


class CostCap:
    """A spending limit in USD and what has been spent and reserved against it (thread-safe)."""

    def __init__(self, limit_usd: float):
        self.limit_usd = float(limit_usd)
        self.spent_usd = 0.0
        self._reserved = 0.0
        self._lock = threading.Lock()
        self.tripped: str | None = None

    def reserve(self, worst_usd: float) -> None:
        """Reserve the worst case of one call, or raise BudgetExceeded."""
        with self._lock:
            if self.tripped is None and self.spent_usd + self._reserved + worst_usd > self.limit_usd:
                self.tripped = (
                    f"stopped before passing --max-cost ${self.limit_usd:.4f}: ${self.spent_usd:.4f} spent, "
                    f"the next call could cost up to ${worst_usd:.4f}; raise --max-cost and rerun the same "
                    "command to resume (answered calls are not paid again)"
                )
            if self.tripped is not None:
                raise BudgetExceeded(self.tripped)
            self._reserved += worst_usd

    def settle(self, worst_usd: float, actual_usd: float) -> None:
        with self._lock:
            self._reserved = max(0.0, self._reserved - worst_usd)
            self.spent_usd += actual_usd


def priced(prices: PriceTable, model: str) -> Price:
    """The price of `model`, which `--max-cost` needs to bound a call's cost."""
    price = prices.find(model)
    if price is None:
        raise ConfigError(
            f"--max-cost needs a price for model {model!r}; add it to a JSON price table passed with --prices"
        )
    return price


class BudgetGuard:
    """Refuses a call whose worst-case cost could take the spend past `cap` (see the module docstring)."""

    def __init__(self, inner: LLM, cap: CostCap, prices: PriceTable, batch: bool = False):
        self.inner = inner
        self.cap = cap
        self.prices = prices
        self.batch = batch

    def worst_case(self, request: ChatRequest) -> float:
        """USD of the request if every prompt token is uncached and the reply takes all of `max_tokens`."""
        price = priced(self.prices, request.model or "")
        prompt = sum(estimate_tokens(m.content) + 4 for m in request.messages)
        output = request.max_tokens or DEFAULT_MAX_TOKENS
        scale = self.prices.batch_discount if self.batch else 1.0
        return (prompt * price.input + output * price.output) * scale / 1_000_000

    async def complete(self, request: ChatRequest) -> Completion:
        worst = self.worst_case(request)
        self.cap.reserve(worst)
        actual = 0.0
        try:
            completion = await self.inner.complete(request)
            actual = self.prices.cost(completion.model, completion.usage, batch=bool(completion.raw.get("batch_id")))
            return completion
        finally:
            self.cap.settle(worst, actual)
