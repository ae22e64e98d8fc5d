"""How many requests at once (`ConcurrencyLimited`), and how many a minute: requests-per-minute and
tokens-per-minute limits for one endpoint (`RateLimited`, a sliding one-minute window).

Tokens are estimated before the call (prompt characters, see `r3con.tokens`, plus the reply budget)
so the limit holds even for calls still in flight. A single request larger than the whole TPM limit
is let through when the window is empty rather than blocking forever.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable

from ...tokens import estimate_tokens
from ..types import LLM, ChatRequest, Completion

WINDOW_S = 60.0


def request_tokens(request: ChatRequest) -> int:
    """Estimated tokens a request will use: its messages plus its reply budget (or 256 without one)."""
    prompt = sum(estimate_tokens(m.content) for m in request.messages)
    return prompt + (request.max_tokens or 256)


class RateLimited:
    """Waits before a call so that the last minute holds at most `rpm` requests and `tpm` tokens."""

    def __init__(self, inner: LLM, *, rpm: int | None = None, tpm: int | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.inner = inner
        self.rpm = rpm
        self.tpm = tpm
        self._clock = clock
        self._sleep = sleep
        self._sent: deque[tuple[float, int]] = deque()
        self._tokens = 0
        self._lock = asyncio.Lock()

    def wait_needed(self, tokens: int) -> float:
        """Seconds until a request of `tokens` fits in the window (0 if it fits now)."""
        now = self._clock()
        while self._sent and self._sent[0][0] <= now - WINDOW_S:
            self._tokens -= self._sent.popleft()[1]
        waits = [0.0]
        if self.rpm is not None and len(self._sent) >= self.rpm:
            waits.append(self._sent[len(self._sent) - self.rpm][0] + WINDOW_S - now)
        if self.tpm is not None and self._sent and self._tokens + tokens > self.tpm:
            # the oldest sends must leave the window until the rest plus this request fit
            excess, freed = self._tokens + tokens - self.tpm, 0
            for sent_at, n in self._sent:
                freed += n
                if freed >= excess:
                    waits.append(sent_at + WINDOW_S - now)
                    break
            else:
                waits.append(self._sent[-1][0] + WINDOW_S - now)
        return max(waits)

    async def complete(self, request: ChatRequest) -> Completion:
        if self.rpm is None and self.tpm is None:
            return await self.inner.complete(request)
        tokens = request_tokens(request)
        async with self._lock:  # admissions in order, so a large request is not starved by small ones
            while (wait := self.wait_needed(tokens)) > 0:
                await self._sleep(wait)
            self._sent.append((self._clock(), tokens))
            self._tokens += tokens
        return await self.inner.complete(request)


class ConcurrencyLimited:
    """At most `limit` requests in flight through this layer."""

    def __init__(self, inner: LLM, limit: int):
        self.inner = inner
        self._semaphore = asyncio.Semaphore(limit)

    async def complete(self, request: ChatRequest) -> Completion:
        async with self._semaphore:
            return await self.inner.complete(request)
