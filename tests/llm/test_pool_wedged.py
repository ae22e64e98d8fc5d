"""A pool member that accepts connections and never answers (a SIGSTOPped server, a hung GPU) is found out in
seconds: its calls, in flight and queued, move at once, and only a probe finds whether it is back."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from r3con.config import Settings
from r3con.llm.discovery.served import EndpointInfo
from r3con.llm.transport.client import OpenAIChat
from r3con.llm.transport.endpoint import Endpoint
from r3con.llm.transport.pool import OUT_S, Pooled, PoolEntry, _Member
from r3con.llm.transport.routing import routing_key
from r3con.llm.types import ChatRequest, Message

from .test_hostile import reply, stub


class Server:
    """Answers chat calls after `delay_s`, or, once `wedged`, holds every request (probes too) without a word."""

    def __init__(self, delay_s: float = 0.05) -> None:
        self.delay_s, self.wedged, self.chats, self.probes = delay_s, False, 0, 0

    async def __call__(self, request: web.Request) -> web.Response:
        if request.path.endswith("/models"):
            self.probes += 1
        if self.wedged:
            await asyncio.sleep(60)
        if request.path.endswith("/models"):
            return web.json_response({"data": [{"id": "m"}]})
        self.chats += 1
        await asyncio.sleep(self.delay_s)
        return reply("ok", {"prompt_tokens": 5, "completion_tokens": 1})


class Clock:
    def __init__(self) -> None:
        self.skew = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skew


def pool_of(urls: list[str], clock: Clock, concurrency: int = 2) -> Pooled:
    members = [_Member(PoolEntry(url), OpenAIChat(Settings(base_url=url, model="m"), Endpoint(url, timeout_s=30)),
                       EndpointInfo(url, "m", 8192, "config"), concurrency) for url in urls]
    return Pooled(members, clock=clock, first_byte_s=0.5, probe_timeout_s=0.5)


def ask(doc: int) -> ChatRequest:
    return ChatRequest((Message("user", f"part {doc}"),), stage="relevance", doc=doc, model="m", max_tokens=10)


async def test_calls_held_or_queued_by_a_wedged_member_move_within_seconds_and_probes_alone_find_its_return():
    a, b = Server(), Server()
    async with stub(a) as url_a, stub(b) as url_b:
        clock = Clock()
        pool = pool_of([url_a, url_b], clock)
        heard: list[str] = []
        pool.subscribe(heard.append)
        try:
            on_a = [d for d in range(1, 60) if pool.endpoint_for(routing_key(ask(d))).entry.url == url_a][:6]  # type: ignore[union-attr]
            assert len(on_a) == 6
            a.wedged = True
            started = time.monotonic()
            # 6 calls for a's documents: 2 in a's slots, 4 queued behind them
            done = await asyncio.wait_for(asyncio.gather(*(pool.complete(ask(d)) for d in on_a)), 10)
            took = time.monotonic() - started
            assert took < 3, f"a wedged member held its calls {took:.1f} s"
            assert all(c.content == "ok" for c in done) and b.chats == 6 and a.chats == 0
            assert sum(c.usage.events.get("failovers", 0) for c in done) == 6
            stats = {s.base_url: s for s in pool.stats()}
            assert stats[url_a].out and stats[url_a].taken_out == 1
            (line,) = heard  # said once, on stderr through the run's progress
            assert line.startswith(f"pool: {url_a} is out: it answered no liveness probe (GET /models) within 0.5 s "
                                   "(stopped or hung?); its calls move to the other endpoints; a probe asks whether "
                                   "it is back from "), line

            clock.skew += OUT_S + 1  # a's time out is over: it is asked by a probe, not with a real call
            probes = a.probes
            await asyncio.wait_for(asyncio.gather(*(pool.complete(ask(d)) for d in range(60, 70))), 5)
            assert a.chats == 0 and a.probes == probes + 1 and b.chats == 16, "one probe failed; no call was sent"

            a.wedged = False  # SIGCONT: the next probe finds it back, and then it gets real calls
            clock.skew += 2 * OUT_S * 2 + 1
            await asyncio.wait_for(asyncio.gather(*(pool.complete(ask(d)) for d in range(100, 130))), 10)
            assert a.chats > 0 and not {s.base_url: s for s in pool.stats()}[url_a].out
        finally:
            await pool.aclose()


async def test_a_busy_member_that_answers_its_probe_keeps_its_calls():
    slow, other = Server(delay_s=1.6), Server()
    async with stub(slow) as url_a, stub(other) as url_b:
        pool = pool_of([url_a, url_b], Clock())
        try:
            doc = next(d for d in range(1, 60) if pool.endpoint_for(routing_key(ask(d))).entry.url == url_a)  # type: ignore[union-attr]
            completion = await asyncio.wait_for(pool.complete(ask(doc)), 10)
            assert completion.usage.events == {} and slow.chats == 1 and other.chats == 0
            assert slow.probes >= 1, "it was asked whether it is alive while the call took long"
        finally:
            await pool.aclose()
