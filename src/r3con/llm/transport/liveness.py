"""Whether an endpoint still answers: a call with no reply for `first_byte_s` has its endpoint probed.

A server that accepts connections and never answers (a process stopped with SIGSTOP, a hung GPU) raises
no error: only the whole-call limit (`--timeout`) would end its calls. So each call watched here that has
had no reply for `first_byte_s` seconds (R3CON_FIRST_BYTE_S) has its endpoint asked GET /models within
`probe_timeout_s` (R3CON_PROBE_TIMEOUT_S). A busy server answers the probe between generations, and its
calls keep waiting (up to `--timeout`); one that does not answer is *lost*: every call watched on it ends
at once with `Silent` (cancelled: nothing was answered, so nothing is counted or paid), and until a probe
answers again (`doubted`) no real call should be sent to it.

What is done with a lost endpoint is its owner's: a pool takes it out and moves its calls (`pool.Pooled`,
one `Liveness` per member); one endpoint alone (`Watched`) turns it into an outage that the retry layer
waits out (`retry.unavailable`), a probe, never a real call, asking whether it is back.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from ...errors import ConfigError, ProviderError
from ..types import LLM, ChatRequest, Completion
from .endpoint import HTTPFailure

T = TypeVar("T")
Probe = Callable[[float], Awaitable[object]]  # GET /models within the seconds given (`OpenAIChat.probe`)


class Silent(Exception):
    """The endpoint stopped answering (no reply, no answer to a liveness probe) while it held the call."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


class Liveness:
    """One endpoint's liveness: what it last answered, whether it is doubted, the probe that asks (one at a time)."""

    def __init__(self, probe: Probe | None, *, first_byte_s: float = 15.0, probe_timeout_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self._probe, self._clock = probe, clock
        self.first_byte_s, self.probe_timeout_s = first_byte_s, probe_timeout_s
        self.gone = asyncio.Event()  # set when it is lost: wakes the calls watched on it (and a pool's queued ones)
        self.doubted = False  # lost: a probe must answer before it gets a real call again
        self.alive_at = -math.inf  # when it last answered (a call or a probe), on `clock`
        self.lost_at = -math.inf  # when it was last found lost
        self.why = ""  # why it was last found lost
        self._probing = asyncio.Lock()
        self._listeners: list[Callable[[str], None]] = []
        self._in_flight: dict[object, tuple[asyncio.Task[object], float]] = {}  # calls watched: task, since when
        self._silenced: set[object] = set()  # calls cancelled because the endpoint was lost
        self._watchdog: asyncio.Future[None] | None = None

    @property
    def fresh_s(self) -> float:
        """How long what a probe (or a reply) found stands for the calls that ask next."""
        return min(self.first_byte_s, self.probe_timeout_s)

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """`listener(why)` hears each time the endpoint is found lost."""
        self._listeners.append(listener)

    async def watched(self, call: Awaitable[T]) -> T:
        """`call`'s result; Silent (the call cancelled) when the endpoint is lost before it comes: it answers no
        probe after `first_byte_s` without a reply, or another call (or the owner) found it lost.

        One watchdog task per endpoint looks at the calls in flight, so a call costs no timer or second task of
        its own (at thousands of calls a second, those were the harness's CPU). The call runs as a task of its
        own, which the watchdog cancels: a call whose reply has come is done, and a cancel leaves it so."""
        call_task = asyncio.ensure_future(call)
        token = object()
        self._in_flight[token] = (call_task, self._clock())
        if self._watchdog is None or self._watchdog.done():
            self._watchdog = asyncio.ensure_future(self._watch())
        try:
            result = await call_task
        except asyncio.CancelledError:
            caller = asyncio.current_task()
            if token in self._silenced and call_task.cancelled() and not (caller and caller.cancelling()):
                raise Silent(self.why) from None  # the watchdog ended it, not the caller's own cancel
            raise
        finally:
            self._in_flight.pop(token, None)
            self._silenced.discard(token)
            if not call_task.done():  # the caller was cancelled: so is its call (whatever it ends with, read)
                call_task.cancel()
                call_task.add_done_callback(lambda t: t.cancelled() or t.exception())
        self.answered()
        return result

    async def _watch(self) -> None:
        """While calls are in flight: each that has waited `first_byte_s` without a reply has the endpoint probed;
        one the probe does not answer is lost (`lost` cancels every call watched on it)."""
        while watched := {t: since for t, (_, since) in self._in_flight.items() if t not in self._silenced}:
            now = self._clock()
            due = min(watched.values()) + self.first_byte_s
            if due > now:
                await asyncio.sleep(due - now)
                continue
            waiting = [token for token, since in watched.items() if since + self.first_byte_s <= now]
            if not await self.alive():
                self._silence(waiting)  # found lost a moment ago by another: these end too
                continue
            for token in waiting:  # busy, not wedged: those calls wait on, asked about again in first_byte_s
                if token in self._in_flight:
                    self._in_flight[token] = (self._in_flight[token][0], self._clock())

    def _silence(self, tokens: Iterable[object]) -> None:
        """End the calls `tokens` watch (each raises Silent in its own task)."""
        for token in tokens:
            if token in self._in_flight and token not in self._silenced:
                self._silenced.add(token)
                self._in_flight[token][0].cancel()

    async def alive(self) -> bool:
        """Whether the endpoint answers a liveness probe (one probe for the calls that ask at once; what it found
        stands for `fresh_s`); one that does not is lost."""
        async with self._probing:
            now = self._clock()
            if now - self.lost_at < self.fresh_s:
                return False  # another call's probe found it lost a moment ago
            if now - self.alive_at < self.fresh_s:
                return True  # it answered a call or a probe a moment ago
            try:
                if self._probe is not None:
                    await asyncio.wait_for(self._probe(self.probe_timeout_s), self.probe_timeout_s)
            except HTTPFailure as failure:
                if failure.status >= 500:  # loading (503) or failing: not back
                    self.lost(f"its liveness probe answered HTTP {failure.status}")
                    return False
            except (ProviderError, ConfigError, TimeoutError, OSError):
                self.lost(f"it answered no liveness probe (GET /models) within {self.probe_timeout_s:g} s "
                          "(stopped or hung?)")
                return False
            self.answered()
            return True

    def answered(self) -> None:
        """It answered (a call or a probe): believed again."""
        self.alive_at = self._clock()
        self.doubted = False

    def lost(self, why: str) -> None:
        """Found silent or failing: doubted until a probe answers, the calls watched on it woken, the owner told."""
        self.doubted, self.why = True, why
        self.alive_at = -math.inf  # what it answered before says nothing about its return
        self.lost_at = self._clock()
        self.gone.set()
        self.gone = asyncio.Event()
        self._silence(list(self._in_flight))  # every call it holds ends at once, as Silent
        for listener in list(self._listeners):
            listener(why)


class Watched:
    """One endpoint alone, watched (`Liveness`): a call it holds without a word is cancelled once the endpoint
    answers no probe, and fails as an outage (a `ProviderError` caused by `Silent`), which the retry layer
    waits out (R3CON_OUTAGE_S); while the endpoint is doubted a probe, not the call, is sent."""

    def __init__(self, inner: LLM, liveness: Liveness, base_url: str):
        self.inner, self.liveness, self.base_url = inner, liveness, base_url

    async def complete(self, request: ChatRequest) -> Completion:
        if self.liveness.doubted and not await self.liveness.alive():
            raise self._outage(Silent(self.liveness.why))
        try:
            return await self.liveness.watched(self.inner.complete(request))
        except Silent as silent:
            raise self._outage(silent) from silent

    def _outage(self, silent: Silent) -> ProviderError:
        error = ProviderError(f"{self.base_url}: no reply: {silent.why}", endpoint=self.base_url)
        error.__cause__ = silent
        return error
