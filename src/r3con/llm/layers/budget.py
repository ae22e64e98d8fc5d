"""`--max-cost`: never let a run folder's spend pass the cap, and use as much of it as is safe.

A call reserves its worst case (the most prompt and reply tokens a reply to it may claim and still be
believed, `client.usage_bounds`: a token per byte sent, `max_tokens` of output; at the model's price)
only while it is in flight: the guard sits below the concurrency limit, so at most
`--concurrency` reservations are open, and each is replaced by the call's actual cost when the reply
comes. A call that does not fit waits for the calls in flight to settle; only a call that does not
fit with nothing in flight stops the run (BudgetExceeded), so a run spends all but the last call's
worst case before it stops. Once tripped the cap stays tripped, so a stage's calls stop together.

The cap covers a run folder: `spent_before` is what earlier attempts of the same folder paid
(`--resume`), read from its call log; calls answered from the LLM cache cost nothing. One `CostCap`
can be shared by many runs (an evaluation): pass it to `build_llm(..., cap=...)`, or open the runs
inside `with sharing(cap):` when they are started through code that does not pass it on (methods).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from ...errors import BudgetExceeded, ConfigError
from ..pricing import Price, PriceTable
from ..transport.client import usage_bounds
from ..types import LLM, ChatRequest, Completion
from .calllog import LogSummary

PRICE_HINT = ('pass --prices FILE (or set R3CON_PRICES_FILE=FILE) with JSON like {{"{model}": {{"input": 0.1, '
              '"output": 0.2}}}} in USD per million tokens')


class CostCap:
    """A spending limit in USD, what has been spent against it, and what calls in flight reserve (thread-safe)."""

    def __init__(self, limit_usd: float, spent_before: float = 0.0):
        self.limit_usd = float(limit_usd)
        self.spent_before = float(spent_before)  # what earlier attempts of the same run folder paid
        self.spent_usd = float(spent_before)
        self._reserved = 0.0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.tripped: str | None = None

    def _stop(self, worst_usd: float) -> str:
        if self.spent_before and self.spent_usd == self.spent_before:  # a resume with no room for even one call
            return (f"this run folder already spent ${self.spent_before:.4f} of --max-cost ${self.limit_usd:.4f}, "
                    f"too little is left for its next call (up to ${worst_usd:.4f}); raise --max-cost to continue it")
        earlier = f" (${self.spent_before:.4f} of it by earlier attempts of this run folder)" if self.spent_before else ""
        return (f"stopped before passing --max-cost ${self.limit_usd:.4f}: ${self.spent_usd:.4f} spent{earlier}, "
                f"the next call could cost up to ${worst_usd:.4f}; raise --max-cost and rerun the same "
                "command, or add --resume RUN_DIR to continue in this run folder (answered calls are not paid again)")

    def _try(self, worst_usd: float) -> bool:
        """Reserve under the lock if it fits; trip when it cannot fit even with nothing in flight."""
        if self.tripped is None and self.spent_usd + self._reserved + worst_usd > self.limit_usd \
                and self._in_flight == 0:
            self.tripped = self._stop(worst_usd)
        if self.tripped is not None:
            raise BudgetExceeded(self.tripped)
        if self.spent_usd + self._reserved + worst_usd > self.limit_usd:
            return False
        self._reserved += worst_usd
        self._in_flight += 1
        return True

    async def acquire(self, worst_usd: float) -> None:
        """Reserve the worst case of one call, waiting for calls in flight to settle if it does not fit yet."""
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._try(worst_usd):
                    return
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
            await waiter

    def settle(self, worst_usd: float, actual_usd: float) -> None:
        """Replace a call's reservation by what it cost, and wake the calls waiting for room."""
        with self._lock:
            self._reserved = max(0.0, self._reserved - worst_usd)
            self._in_flight = max(0, self._in_flight - 1)
            # a reply's cost is never below zero nor unbounded (client.checked_usage); a NaN would disarm the cap
            self.spent_usd += actual_usd if math.isfinite(actual_usd) and actual_usd > 0 else 0.0
            waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            loop.call_soon_threadsafe(_wake, waiter)


_SHARED: ContextVar[CostCap | None] = ContextVar("r3con_shared_cost_cap", default=None)


@contextmanager
def sharing(cap: CostCap | None) -> Iterator[None]:
    """Every `build_llm` opened in this context (and the tasks it starts) spends against `cap`."""
    token = _SHARED.set(cap)
    try:
        yield
    finally:
        _SHARED.reset(token)


def shared_cap() -> CostCap | None:
    """The cap of the enclosing `sharing(...)`, if any."""
    return _SHARED.get()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def priced(prices: PriceTable, model: str) -> Price:
    """The price of `model`, which `--max-cost` needs to bound a call's cost."""
    price = prices.find(model)
    if price is None:
        raise ConfigError(f"--max-cost needs a price for model {model!r}, and neither genai-prices nor a --prices file has one: "
                          + PRICE_HINT.format(model=model))
    return price


def check_prices(prices: PriceTable, models: Iterable[str]) -> None:
    """ConfigError (before any call) when a model the run will use has no price to bound its cost."""
    for model in dict.fromkeys(models):
        priced(prices, model)


def spent_in(calls_log: Path | None) -> float:
    """USD the calls in a run folder's calls.jsonl cost (cache hits cost nothing); 0.0 when there is none."""
    return LogSummary.of(calls_log).usd


class BudgetGuard:
    """Reserves each call's worst case against `cap` while it is in flight (see the module docstring)."""

    def __init__(self, inner: LLM, cap: CostCap, prices: PriceTable, batch: bool = False,
                 models_of: Callable[[str], Sequence[str]] = lambda model: (model,)):
        self.inner = inner
        self.cap = cap
        self.prices = prices
        self.batch = batch
        self.models_of = models_of  # the models that may answer a request naming one (a pool of several: each)

    def worst_case(self, request: ChatRequest) -> float:
        """USD of the request if its reply claims the most tokens `client.checked_usage` believes (a prompt token per
        byte sent, all of `max_tokens`), every prompt token at the dearer of the input prices: no reply can cost
        more, so none passes the cap (the prompt's own estimate, about a token per 4 bytes, could be passed)."""
        prompt, output = usage_bounds(request)
        scale = self.prices.batch_discount if self.batch else 1.0
        worst = 0.0
        for model in self.models_of(request.model or ""):
            price = priced(self.prices, model)
            worst = max(worst, prompt * max(price.input, price.cached_input or 0.0) + output * price.output)
        return worst * scale / 1_000_000

    async def complete(self, request: ChatRequest) -> Completion:
        worst = self.worst_case(request)
        await self.cap.acquire(worst)
        actual = 0.0
        try:
            completion = await self.inner.complete(request)
            actual = self.prices.cost(completion.model, completion.usage, batch=bool(completion.raw.get("batch_id"))) or 0.0
            return completion
        finally:
            self.cap.settle(worst, actual)
