"""One endpoint alone that accepts connections and never answers (a SIGSTOPped server, a hung GPU): its calls are
cancelled within first_byte_s + probe_timeout_s, the wait is said, probes alone ask whether it is back, and the
calls are sent again once it is: counted as waits, not retries, and paid once."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web

from r3con.config import Settings
from r3con.errors import ProviderError
from r3con.llm import build_llm
from r3con.llm.transport.liveness import Liveness, Silent
from r3con.llm.types import ChatRequest, Message

from .test_hostile import reply, stub

FIRST_BYTE_S = PROBE_S = 0.3


class Server:
    """Answers chat calls after `delay_s`; while `wedged` is set it holds every request (probes too) without a
    word. Counts what it answered and every probe."""

    def __init__(self, delay_s: float = 0.05) -> None:
        self.delay_s, self.answered, self.probes, self.held = delay_s, 0, 0, 0
        self.wedged = asyncio.Event()
        self.back = asyncio.Event()

    def wedge(self) -> None:
        self.wedged.set()
        self.back = asyncio.Event()

    def recover(self) -> None:
        self.wedged.clear()
        self.back.set()

    async def __call__(self, request: web.Request) -> web.Response:
        probe = request.path.endswith("/models")
        self.probes += probe
        if self.wedged.is_set():
            self.held += not probe
            await self.back.wait()  # a SIGSTOPped process: the connection stays open, nothing comes
            await asyncio.sleep(3600)  # what it held before SIGCONT, the client gave up on
        if probe:
            return web.json_response({"data": [{"id": "m"}]})
        await asyncio.sleep(self.delay_s)
        self.answered += 1
        return reply("ok", {"prompt_tokens": 5, "completion_tokens": 1})


def settings(url: str, **more: object) -> Settings:
    return Settings(base_url=url, model="m", context_window=8192, concurrency=4, request_timeout_s=60,
                    first_byte_s=FIRST_BYTE_S, probe_timeout_s=PROBE_S, retry_base_s=0.2, **more)  # type: ignore[arg-type]


def ask(doc: int) -> ChatRequest:
    return ChatRequest((Message("user", f"part {doc}"),), stage="relevance", doc=doc, max_tokens=10)


async def test_a_wedged_endpoint_is_waited_out_as_an_outage_said_at_once_and_its_calls_sent_again_once():
    server = Server()
    async with stub(server) as url, build_llm(settings(url, outage_s=20)) as llm:
        heard: list[tuple[float, str]] = []
        llm.view.listen(lambda usage: None, lambda line: heard.append((time.monotonic(), line)))
        await llm.complete(ask(0))  # it answers: not doubted
        server.wedge()
        started = time.monotonic()
        calls = asyncio.gather(*(llm.complete(ask(d)) for d in range(1, 7)))  # 4 held, 2 queued for a slot
        await asyncio.sleep(1.5)
        held, answered, probes = server.held, server.answered, server.probes
        server.recover()  # SIGCONT
        done = await asyncio.wait_for(calls, 10)
        took = time.monotonic() - started
    assert [c.content for c in done] == ["ok"] * 6 and took < 5, took
    assert held == 4 and answered == 1, "while it was wedged only the first 4 calls were sent; the queued 2 were not"
    assert probes >= 2, "probes asked whether it was back"
    assert server.answered == 7, "each call was answered once after the wedge"
    events = [c.usage.events for c in done]
    assert all(e.get("waits", 0) >= 1 and "retries" not in e for e in events), events
    total = llm.ledger.total()
    assert total.calls == 7 and total.prompt_tokens == 35, "the cancelled calls were not counted nor paid"
    assert heard, "the wait was said"
    first_at, first = heard[0]
    assert first_at - started < FIRST_BYTE_S + PROBE_S + 0.5, "said once the probe went unanswered"
    assert first.startswith(f"waiting 0.2 s for {url} (no reply, and it answered no liveness probe (GET /models) within "
                            f"{PROBE_S:g} s (stopped or hung?): wedged for 0 s of the 20 s waited out, R3CON_OUTAGE_S; "
                            "its calls were cancelled, and are sent again once a probe answers) until "), first
    assert first.endswith("; Ctrl-C stops, --resume continues")
    assert all("wedged for" in line for _, line in heard)


async def test_a_wedge_that_outlasts_the_outage_limit_ends_the_call_with_the_fix_and_no_call_is_sent_meanwhile():
    server = Server()
    async with stub(server) as url, build_llm(settings(url, outage_s=2)) as llm:
        server.wedge()
        started = time.monotonic()
        with pytest.raises(ProviderError, match=r"giving up the server was unavailable for \d+ s \(R3CON_OUTAGE_S=2\)"
                           r".*restart it, or raise R3CON_OUTAGE_S") as caught:
            await asyncio.wait_for(llm.complete(ask(1)), 10)
        took = time.monotonic() - started
        server.recover()
    assert took < FIRST_BYTE_S + PROBE_S + 2 + 1, took
    assert server.held == 1 and server.probes >= 2, "after the first call, only probes asked"
    assert caught.value.usage is not None and caught.value.usage.events.get("waits", 0) >= 1
    assert "retries" not in caught.value.usage.events


async def test_a_busy_endpoint_that_answers_its_probe_keeps_its_call():
    server = Server(delay_s=1.2)
    async with stub(server) as url, build_llm(settings(url)) as llm:
        completion = await asyncio.wait_for(llm.complete(ask(1)), 10)
    assert completion.content == "ok" and completion.usage.events == {}
    assert server.answered == 1 and server.probes >= 1, "asked whether it is alive while the call took long"


async def test_a_reply_that_came_as_the_endpoint_was_found_lost_is_kept_and_a_callers_cancel_stays_a_cancel():
    liveness = Liveness(None, first_byte_s=60)
    gate = asyncio.get_running_loop().create_future()

    async def call() -> str:
        return await gate

    waiter = asyncio.ensure_future(liveness.watched(call()))
    await asyncio.sleep(0)  # the call is in flight
    gate.set_result("ok")  # its reply comes...
    await asyncio.sleep(0)
    liveness.lost("stopped answering")  # ...as another call finds the endpoint lost
    assert await waiter == "ok", "an answered call is never dropped (it would be paid again elsewhere)"

    started = asyncio.Event()

    async def slow() -> str:
        started.set()
        await asyncio.sleep(60)
        return "late"

    waiter = asyncio.ensure_future(liveness.watched(slow()))
    await started.wait()
    liveness.lost("stopped answering")
    with pytest.raises(Silent):
        await waiter
    waiter = asyncio.ensure_future(liveness.watched(slow()))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
