"""Replies are untrusted input: hostile stub servers (aiohttp on 127.0.0.1), each test bounded to seconds."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from r3con.config import Settings
from r3con.errors import BudgetExceeded, ConfigError, OutputError
from r3con.llm.json_reply import NoJSON, extract_json
from r3con.llm.layers.accounting import Ledger
from r3con.llm.layers.budget import BudgetGuard, CostCap
from r3con.llm.pricing import Price, PriceTable
from r3con.llm.transport.client import OpenAIChat, reply_limit
from r3con.llm.transport.embeddings import open_embedder
from r3con.llm.types import ChatRequest, Message

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REQUEST = ChatRequest((Message("user", "How many ships reached Whitby?"),), stage="relevance", doc=1, model="m",
                      max_tokens=100)


@asynccontextmanager
async def stub(handler: Handler) -> AsyncIterator[str]:
    """A server on a free loopback port that answers every path with `handler`; yields its base URL."""
    app = web.Application()
    async def handle(request: web.Request) -> web.StreamResponse:
        return await handler(request)

    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


def reply(content: str = "ok", usage: object = None, raw_usage: str | None = None) -> web.Response:
    body = {"model": "m", "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
    if usage is not None:
        body["usage"] = usage
    text = json.dumps(body)
    if raw_usage is not None:  # JSON Python would not write: 1e400
        text = text[:-1] + f', "usage": {raw_usage}}}'
    return web.Response(text=text, content_type="application/json")


def chat(url: str, **settings: object) -> OpenAIChat:
    return OpenAIChat(Settings(base_url=url, model="m", request_timeout_s=5, **settings))  # type: ignore[arg-type]


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": -1_000_000_000, "completion_tokens": -5},
    {"prompt_tokens": "many", "completion_tokens": 3},
    {"prompt_tokens": 12, "completion_tokens": True},
    {"prompt_tokens": 10**9, "completion_tokens": 3},  # more tokens than the request has bytes
    {"prompt_tokens": 12, "completion_tokens": 5000},  # more than max_tokens
    None,
])
async def test_usage_that_cannot_be_true_is_replaced_by_the_estimate_and_flagged(usage):
    async def handler(request: web.Request) -> web.Response:
        return reply("Three ships.", usage)

    async with stub(handler) as url:
        client = chat(url)
        try:
            completion = await client.complete(REQUEST)
        finally:
            await client.aclose()
    u = completion.usage
    assert u.events == {"usage_estimated": 1}
    assert 5 <= u.prompt_tokens <= 40 and 1 <= u.completion_tokens <= 10, u


async def test_an_infinite_count_is_flagged_and_a_true_one_is_kept():
    answers = iter([reply(raw_usage='{"prompt_tokens": 1e400, "completion_tokens": 2}'),
                    reply(usage={"prompt_tokens": 11, "completion_tokens": 2})])

    async def handler(request: web.Request) -> web.Response:
        return next(answers)

    async with stub(handler) as url:
        client = chat(url)
        try:
            estimated = await client.complete(REQUEST)
            true = await client.complete(REQUEST)
        finally:
            await client.aclose()
    assert estimated.usage.events == {"usage_estimated": 1} and estimated.usage.prompt_tokens > 0
    assert (true.usage.prompt_tokens, true.usage.completion_tokens, true.usage.events) == (11, 2, {})


async def test_negative_usage_cannot_lower_what_the_run_spent_nor_pass_the_cap():
    async def handler(request: web.Request) -> web.Response:
        return reply(usage={"prompt_tokens": -10**12, "completion_tokens": -10**12})

    prices = PriceTable({"m": Price(input=1.0, output=2.0)})
    async with stub(handler) as url:
        client = chat(url)
        cap = CostCap(0.01)
        guard = BudgetGuard(client, cap, prices)
        try:
            spent = []
            for _ in range(3):
                await guard.complete(REQUEST)
                spent.append(cap.spent_usd)
        finally:
            await client.aclose()
    assert 0 < spent[0] < spent[1] < spent[2] <= cap.limit_usd, spent


async def test_a_reply_nested_ten_thousand_deep_is_an_output_error_not_a_crash():
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="[" * 10_000 + "]" * 10_000, content_type="application/json")

    async with stub(handler) as url:
        client = chat(url)
        try:
            with pytest.raises(OutputError, match="nested deeper than 64 levels"):
                await client.complete(REQUEST)
        finally:
            await client.aclose()


@pytest.mark.parametrize("text", ['{"a": ' + "[" * 10_000 + "]" * 10_000 + "}",  # valid JSON
                                  '{"a": ' + "[" * 10_000,  # what json-repair is asked to mend
                                  '{"a": ' + "[" * 100 + "]" * 100 + "}"])  # parsed, but deeper than allowed
def test_content_nested_too_deep_is_no_json_in_every_parser(text):
    with pytest.raises(NoJSON):
        extract_json(text)


async def test_an_endless_reply_is_read_no_further_than_the_cap():
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"choices": [{"message": {"content": "')
        while True:
            await response.write(b"a" * 65536)

    async with stub(handler) as url:
        client = chat(url, max_reply_bytes=1 << 20)
        started = time.monotonic()
        try:
            with pytest.raises(OutputError, match="passed 1,048,576 bytes"):
                await client.complete(REQUEST)
        finally:
            await client.aclose()
    assert time.monotonic() - started < 3


def test_the_default_reply_cap_follows_max_tokens():
    assert reply_limit(100) == (1 << 20) + 6400 and reply_limit(4096) > reply_limit(100)
    assert reply_limit(100, configured=5000) == 5000


async def test_a_post_is_not_sent_on_by_a_redirect():
    seen: list[str] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request.path)
        return reply()

    async with stub(elsewhere) as other:
        async def handler(request: web.Request) -> web.Response:
            raise web.HTTPTemporaryRedirect(other.replace("/v1", "/v1/chat/completions") + "?token=secret")

        async with stub(handler) as url:
            client = chat(url)
            try:
                with pytest.raises(ConfigError, match=r"redirects \(HTTP 307\) to http://127\.0\.0\.1:\d+/v1/chat") \
                        as caught:
                    await client.complete(REQUEST)
            finally:
                await client.aclose()
    assert seen == [] and "secret" not in str(caught.value)



async def test_replies_claiming_the_most_usage_believed_never_lift_the_spend_past_the_cap():
    """A call reserves its expected cost (the prompt's estimate, about a token per 4 bytes, and all of max_tokens);
    a reply may claim up to a token per byte sent. A claim that fits in what is left is charged as claimed; one
    that would pass the cap is charged at r3con's estimate (flagged `usage_capped`) and trips the cap, however
    many such replies were in flight together."""
    sent = sum(len(m.content.encode()) for m in REQUEST.messages) + 64 * (len(REQUEST.messages) + 1)
    claimed = {"prompt_tokens": sent, "completion_tokens": (REQUEST.max_tokens or 0) + 64}
    async def handler(request: web.Request) -> web.Response:
        return reply("Three ships.", claimed)

    prices = PriceTable({"m": Price(input=1.0, output=2.0)})  # $0.000486 a reply as claimed
    async with stub(handler) as url:
        client = chat(url)
        try:
            cap = CostCap(0.0009)
            guard = BudgetGuard(client, cap, prices)
            assert guard.expected(REQUEST) < 0.0009 / 2 < guard.worst_case(REQUEST), "two expected costs fit, not two claims"
            answered = [await guard.complete(REQUEST), await guard.complete(REQUEST)]
            with pytest.raises(BudgetExceeded, match="a reply claimed .* more than was left"):
                await guard.complete(REQUEST)
            outcomes = []
            for limit in (0.002, 0.0031, 0.0047):  # in flight together, every reply claiming the most
                together = CostCap(limit)
                outcomes.append((together, await asyncio.gather(*(BudgetGuard(client, together, prices).complete(REQUEST)
                                                                  for _ in range(12)), return_exceptions=True)))
        finally:
            await client.aclose()
    first, second = answered
    assert (first.usage.prompt_tokens, first.usage.completion_tokens, first.usage.events) == (sent, 164, {}), \
        "the first claim fit: believed, and charged as claimed"
    assert second.usage.events == {"usage_capped": 1} and second.usage.prompt_tokens < sent / 3
    assert cap.spent_usd <= cap.limit_usd
    for together, replies in outcomes:
        done = [o for o in replies if not isinstance(o, BaseException)]
        assert all(isinstance(o, BudgetExceeded) for o in replies if isinstance(o, BaseException))
        assert len(done) >= 2 and together.spent_usd <= together.limit_usd, (together.spent_usd, together.limit_usd)
        assert any(o.usage.events.get("usage_capped") for o in done), "the claims that did not fit were not charged"


async def test_an_embeddings_reply_claiming_more_tokens_than_it_was_sent_bytes_is_estimated_and_flagged(tmp_path):
    async def handler(request: web.Request) -> web.Response:
        if request.path.endswith("/embeddings"):
            return web.json_response({"data": [{"index": 0, "embedding": [0.1, 0.2]}],
                                      "usage": {"prompt_tokens": 10**9}})
        return web.json_response({"data": [{"id": "e"}]})

    prices_file = tmp_path / "prices.json"
    prices_file.write_text('{"e": {"input": 1.0, "output": 0}}')
    async with stub(handler) as url:
        cap = CostCap(0.001)
        ledger = Ledger()
        async with open_embedder(Settings(base_url=url, embedding_model="e", prices_file=prices_file),
                                 stage="rag-embed", cap=cap, ledger=ledger) as embedder:
            assert embedder is not None
            assert await embedder.embed(["one two"]) == [[0.1, 0.2]]
    usage = ledger.by_stage()["rag-embed"]
    assert usage.events == {"usage_estimated": 1} and 1 <= usage.prompt_tokens <= 15, usage
    assert 0 < cap.spent_usd <= cap.limit_usd
