"""Retries of transient transport failures, with exponential backoff, full jitter and Retry-After.

Retried: HTTP 408, 409, 429 and 5xx, timeouts and dropped connections (ProviderError without a status).
Not retried: other 4xx (the request itself is wrong), a too-long context, configuration errors. A
run shares one `RetryBudget`; when it is spent, or one call used its own attempts, the call fails with
a message naming the endpoint, the last error and what helps. Broken *output* (empty, cut, refused) is
handled above this layer by `OutputChecked`, which spends the same budget.

A server that is down or restarting (connection refused, or HTTP 503 as llama.cpp answers while it
loads its model: "Loading model") is waited for instead: such a call is tried again every few seconds
(doubling from `base_s` up to `OUTAGE_STEP_S`) until it is answered or the server has been unavailable
to it for `outage_s` seconds (R3CON_OUTAGE_S, 180 by default: a restart of a minute or two is ridden
out). A server that holds calls without a word and answers no liveness probe (wedged: SIGSTOP, a hung
GPU; `liveness.Watched` cancels its calls) is waited for the same way, within the same `outage_s`; each
try is a probe first, never a real call while it does not answer. These waits cost no tokens, so they
spend neither the call's attempts nor the run's budget.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from ...errors import ContextTooLong, ProviderError
from ..transport.liveness import Silent
from ..types import LLM, ChatRequest, Completion, Usage

RETRYABLE_STATUS = frozenset({408, 409, 429})
OUTAGE_STEP_S = 10.0  # the longest wait between two tries of a server that is down
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Per call: up to `retries` attempts after the first; waits `base_s * 2**n` at most (full jitter)."""

    retries: int = 6
    base_s: float = 0.5
    max_s: float = 60.0
    call_s: float | None = None  # the longest one call may take, its retries and their waits included
    outage_s: float = 180.0  # how long one call waits for a server that refuses connections or answers 503

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number `attempt` (0-based): Retry-After if given, else jittered backoff."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_s)
        return rng.uniform(0, min(self.max_s, self.base_s * 2**attempt))


class RetryBudget:
    """Retries a whole run may spend, shared by every call and every layer that retries."""

    def __init__(self, total: int):
        self.total = total
        self.spent = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Spend one retry; False when none is left."""
        with self._lock:
            if self.spent >= self.total:
                return False
            self.spent += 1
            return True


def unavailable(exc: ProviderError) -> bool:
    """Whether the server is down, starting or wedged: HTTP 503, the connection refused, or no reply and no
    answer to a liveness probe (`liveness.Silent`)."""
    if exc.status is not None:
        return exc.status == 503
    link: BaseException | None = exc
    while link is not None:
        if isinstance(link, ConnectionRefusedError | Silent) or isinstance(getattr(link, "os_error", None),
                                                                           ConnectionRefusedError):
            return True
        link = link.__cause__
    return False


def silenced(exc: BaseException) -> Silent | None:
    """What the liveness probe found when `exc` came from an endpoint that holds calls without a word and
    answers no probe (wedged: `liveness.Silent`); None otherwise."""
    link: BaseException | None = exc
    while link is not None and not isinstance(link, Silent):
        link = link.__cause__
    return link if isinstance(link, Silent) else None


def retryable(exc: ProviderError) -> bool:
    if isinstance(exc, ContextTooLong):
        return False
    return exc.status is None or exc.status in RETRYABLE_STATUS or exc.status >= 500


class Retrier:
    """The retry loop for any call to the endpoint: chat completions (`Retrying`) and embeddings."""

    def __init__(self, policy: RetryPolicy, budget: RetryBudget, endpoint: str, *,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, seed: int | None = None):
        self.policy = policy
        self.budget = budget
        self.endpoint = endpoint
        self._sleep = sleep
        self._rng = random.Random(seed)
        self._listeners: list[Callable[[str], None]] = []
        self._told_until = 0.0  # the end of the last wait said: the calls waiting together are said once

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """`listener(line)` hears of every wait of a second or more (a progress line shows it)."""
        self._listeners.append(listener)

    async def run(self, attempt: Callable[[], Awaitable[T]]) -> tuple[T, int, int]:
        """`attempt()`'s result, the retries it took and its waits for a server that was down (which spend no
        retry); raises the last error when retrying stops."""
        retries = waits = 0
        spent = 0.0  # seconds of this call so far: its attempts and its waits
        down: float | None = None  # when the server was first seen down, in this call's seconds
        while True:
            started = time.monotonic()
            try:
                return await attempt(), retries, waits
            except ProviderError as exc:
                spent += time.monotonic() - started
                if not retryable(exc):
                    raise
                if unavailable(exc):
                    down = spent if down is None else down
                    delay = min(OUTAGE_STEP_S, self.policy.base_s * 2 ** min(waits, 10)) \
                        if exc.retry_after is None else min(max(0.0, exc.retry_after), self.policy.max_s)
                    if spent - down + delay > self.policy.outage_s:
                        raise _gave_up(exc, self.endpoint, f"the server was unavailable for {spent - down:.0f} s "
                                       f"(R3CON_OUTAGE_S={self.policy.outage_s:g})", retries, waits=waits) from exc
                    if self.policy.call_s is None or spent + delay <= self.policy.call_s:
                        if delay >= 1 or silenced(exc):  # a wedge has cost first_byte_s already: said at once
                            self._tell(exc, delay, down=spent - down)
                        await self._sleep(delay)
                        spent += delay
                        waits += 1
                        continue
                down = None
                if retries >= self.policy.retries:
                    raise _gave_up(exc, self.endpoint, f"after {retries + 1} attempts", retries) from exc
                asked = exc.retry_after
                if asked is not None and self.policy.call_s is not None and asked > self.policy.call_s:
                    raise _gave_up(exc, self.endpoint, f"at once: it asks to wait {asked:g} s (Retry-After), longer "
                                   f"than the one-call limit of {self.policy.call_s:g} s (R3CON_MAX_CALL_S); wait, "
                                   "then continue with --resume RUN_DIR", retries, hint=False) from exc
                if not self.budget.take():
                    raise _gave_up(exc, self.endpoint, f"the run's retry budget of {self.budget.total} is spent",
                                   retries) from exc
                delay = self.policy.delay(retries, exc.retry_after, self._rng)
                if self.policy.call_s is not None and spent + delay > self.policy.call_s:
                    raise _gave_up(exc, self.endpoint, f"after {retries + 1} attempts, at the one-call limit of "
                                   f"{self.policy.call_s:g} s (R3CON_MAX_CALL_S)", retries) from exc
                if delay >= 1:
                    self._tell(exc, delay)
                await self._sleep(delay)
                spent += delay
                retries += 1


    def _tell(self, exc: ProviderError, delay: float, down: float | None = None) -> None:
        why = "a rate limit (HTTP 429)" if exc.status == 429 else (f"HTTP {exc.status}" if exc.status else "no reply")
        wedge = silenced(exc)
        if down is not None and wedge is not None:  # calls held without a word, no probe answered
            why = (f"no reply, and {wedge.why}: wedged for {down:.0f} s of the {self.policy.outage_s:g} s "
                   "waited out, R3CON_OUTAGE_S; its calls were cancelled, and are sent again once a probe answers")
        elif down is not None:  # an outage: say how long it has lasted and how long it is waited out
            why = (f"{'HTTP 503' if exc.status == 503 else 'connection refused'}: down or loading for {down:.0f} s "
                   f"of the {self.policy.outage_s:g} s waited out, R3CON_OUTAGE_S")
        told = f"; it asked for {exc.retry_after:g} s" if exc.retry_after is not None else ""
        if time.time() + delay <= self._told_until + 1.0:
            return  # another call's wait, ending with this one, was said
        self._told_until = time.time() + delay
        until = time.strftime("%H:%M:%S", time.localtime(time.time() + delay))
        shown = f"{delay:.0f}" if delay >= 1 else f"{delay:.1f}"
        line = (f"waiting {shown} s for {self.endpoint or exc.endpoint} ({why}{told}) until {until}; "
                "Ctrl-C stops, --resume continues")
        for listener in list(self._listeners):
            listener(line)


class Retrying:
    """Retries transient endpoint failures; the completion's usage counts the retries it took."""

    def __init__(self, inner: LLM, policy: RetryPolicy, budget: RetryBudget, endpoint: str, *,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, seed: int | None = None):
        self.inner = inner
        self.retrier = Retrier(policy, budget, endpoint, sleep=sleep, seed=seed)

    @classmethod
    def with_retrier(cls, inner: LLM, retrier: Retrier) -> Retrying:
        """The layer over `inner` retrying through `retrier` (one the run's other clients share)."""
        layer = cls(inner, retrier.policy, retrier.budget, retrier.endpoint)
        layer.retrier = retrier
        return layer

    async def complete(self, request: ChatRequest) -> Completion:
        completion, retries, waits = await self.retrier.run(lambda: self.inner.complete(request))
        if retries or waits:
            usage = completion.usage.with_event("retries", retries).with_event("waits", waits)
            completion = replace(completion, usage=usage)
        return completion


def _gave_up(exc: ProviderError, endpoint: str, why: str, retries: int, *, hint: bool = True,
             waits: int = 0) -> ProviderError:
    advice = f"; {_helps(exc)}" if hint else ""
    events = {name: n for name, n in (("retries", retries), ("waits", waits)) if n}
    return ProviderError(
        f"{endpoint or exc.endpoint}: giving up {why}; last error: {exc}{advice}",
        status=exc.status, body=exc.body, endpoint=exc.endpoint or endpoint, retry_after=exc.retry_after,
        usage=Usage(events=events) if events else None,
    )


def _helps(exc: ProviderError) -> str:
    """What helps against the last error: a busy server, one that is down, or one that refuses."""
    if silenced(exc):
        return ("the server accepts connections but answers nothing, not even GET /models (stopped with SIGSTOP? "
                "a hung GPU?): restart it, or raise R3CON_OUTAGE_S")
    if "timed out" in str(exc):
        return ("the server is busy or slow: lower --concurrency (to its slots, llama.cpp's -np), or raise "
                "--timeout and R3CON_MAX_CALL_S")
    if unavailable(exc):
        return "start the server (or wait until it has loaded its model), or raise R3CON_OUTAGE_S"
    return "check the endpoint or raise --retries"
