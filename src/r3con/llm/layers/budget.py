"""`--max-cost`: never let a run folder's spend pass the cap, and use as much of it as is safe.

A call reserves what it is expected to cost (`BudgetGuard.expected`: the prompt's estimate and a reply
as long as the longest of its stage so far, every prompt token at the dearest input price) only while it is in flight: the guard
sits below the concurrency limit, so at most `--concurrency` reservations are open. When the reply
comes, its cost as claimed is settled against its reservation and what no other call holds: a claim
that fits is charged as claimed; one that would lift the spend past the cap (a reply may claim up to a
token per byte sent, `client.usage_bounds`) is not believed: it is charged at r3con's own estimate of
its tokens, which its reservation holds, marked with the event `usage_capped`, and the cap trips. So
however many replies in flight claim the most, the spend never passes the cap, and a run spends all
but about one call's expected cost before it stops. A call that does not fit waits for the calls in
flight to settle; only a call that does not fit with nothing in flight stops the run (BudgetExceeded).
Once tripped the cap stays tripped, so a stage's calls stop together.

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
from dataclasses import replace
from pathlib import Path

from ...errors import BudgetExceeded, ConfigError
from ...tokens import estimate_tokens
from ..pricing import Price, PriceTable
from ..transport.client import usage_bounds
from ..types import LLM, ChatRequest, Completion, Usage
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

    def settle(self, reserved_usd: float, actual_usd: float, fallback_usd: float | None = None) -> bool:
        """Replace a call's reservation by what it cost, and wake the calls waiting for room. A cost that does not
        fit in its reservation and what no other call holds is charged at `fallback_usd` (at most the reservation)
        instead, and trips the cap: False then."""
        # a reply's cost is never below zero nor unbounded (client.checked_usage); a NaN would disarm the cap
        actual = actual_usd if math.isfinite(actual_usd) and actual_usd > 0 else 0.0
        with self._lock:
            self._reserved = max(0.0, self._reserved - reserved_usd)
            self._in_flight = max(0, self._in_flight - 1)
            fits = self.spent_usd + self._reserved + actual <= self.limit_usd or fallback_usd is None
            self.spent_usd += actual if fits else min(max(0.0, fallback_usd or 0.0), reserved_usd)
            if not fits and self.tripped is None:
                self.tripped = (f"stopped at --max-cost ${self.limit_usd:.4f}: a reply claimed ${actual:.4f}, more "
                                "than was left, and was charged at r3con's estimate of its tokens instead; raise "
                                "--max-cost and rerun the same command, or add --resume RUN_DIR to continue in "
                                "this run folder (answered calls are not paid again)")
            waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            loop.call_soon_threadsafe(_wake, waiter)
        return fits


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
    """Reserves each call's expected cost against `cap` while it is in flight, and settles its reply's (see the
    module docstring)."""

    def __init__(self, inner: LLM, cap: CostCap, prices: PriceTable, batch: bool = False,
                 models_of: Callable[[str], Sequence[str]] = lambda model: (model,)):
        self.inner = inner
        self.cap = cap
        self.prices = prices
        self.batch = batch
        self.models_of = models_of  # the models that may answer a request naming one (a pool of several: each)
        self._longest: dict[str, int] = {}  # the longest reply believed so far, per stage

    def _usd(self, request: ChatRequest, prompt: int, output: int) -> float:
        """USD of `prompt` and `output` tokens at the dearest of the models that may answer `request`, every
        prompt token at the dearest input price (a cache write at Anthropic)."""
        scale = self.prices.batch_discount if self.batch else 1.0
        most = 0.0
        for model in self.models_of(request.model or ""):
            price = priced(self.prices, model)
            most = max(most, prompt * price.dearest_input + output * price.output)
        return most * scale / 1_000_000

    def expected(self, request: ChatRequest) -> float:
        """What the call is expected to cost: r3con's estimate of its prompt (as `client.checked_usage` estimates a
        reply it does not believe) and a reply as long as the longest of its stage so far (all of `max_tokens`
        until one came)."""
        most = usage_bounds(request)[1]
        return self._usd(request, estimated_prompt(request), min(most, self._longest.get(request.stage or "", most)))

    def worst_case(self, request: ChatRequest) -> float:
        """USD of the request if its reply claims the most tokens `client.checked_usage` believes (a prompt token per
        byte sent, all of `max_tokens`): what a reply may claim, settled against what is left."""
        return self._usd(request, *usage_bounds(request))

    async def complete(self, request: ChatRequest) -> Completion:
        reserved = self.expected(request)
        await self.cap.acquire(reserved)
        settled = False
        try:
            completion = await self.inner.complete(request)
            batch = bool(completion.raw.get("batch_id"))
            actual = self.prices.cost(completion.model, completion.usage, batch=batch) or 0.0
            estimate = Usage(calls=1, prompt_tokens=estimated_prompt(request),
                             completion_tokens=min(estimate_tokens(completion.content + (completion.reasoning or "")),
                                                   usage_bounds(request)[1]))
            fallback = self.prices.cost(completion.model, estimate, batch=batch) or 0.0
            settled = True
            if not self.cap.settle(reserved, actual, fallback):
                return replace(completion, usage=estimate.with_event("usage_capped"))
            stage = request.stage or ""
            self._longest[stage] = max(self._longest.get(stage, 0), completion.usage.completion_tokens)
            return completion
        finally:
            if not settled:
                self.cap.settle(reserved, 0.0)


def estimated_prompt(request: ChatRequest) -> int:
    """r3con's own estimate of a request's prompt tokens (`client.checked_usage`'s for a reply it does not believe)."""
    return sum(estimate_tokens(m.content) + 4 for m in request.messages)
