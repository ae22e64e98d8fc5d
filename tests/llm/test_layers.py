"""The small layers around the seam: concurrency, stage models, accounting and the call log."""

import asyncio
import json
import stat
from dataclasses import replace

import pytest

from r3con.errors import BudgetExceeded, ProviderError
from r3con.llm.cache import CallCache, cache_key
from r3con.llm.layers.accounting import Accounted, Ledger
from r3con.llm.layers.answered import Answered
from r3con.llm.layers.calllog import CallLog, Recorded
from r3con.llm.layers.limits import ConcurrencyLimited
from r3con.llm.layers.shaped import Shaped
from r3con.llm.pricing import Price, PriceTable
from r3con.llm.types import ChatRequest, Completion, Message, Usage

from ..fakes import ScriptedLLM

PRICES = PriceTable({"m": Price(input=1.0, output=2.0)})  # USD per million tokens
USAGE = Usage(calls=1, prompt_tokens=1_000_000, completion_tokens=500_000)


def request(stage: str = "relevance", doc: int | None = 1, text: str = "hello", model: str | None = "m",
            **kw) -> ChatRequest:
    return ChatRequest(messages=(Message("user", text),), stage=stage, doc=doc, prompt_name=stage,
                       prompt_hash=f"h-{stage}", model=model, **kw)


def answer(content: str = "ok", usage: Usage = USAGE, **kw) -> Completion:
    return Completion(content=content, finish_reason="stop", model="m", usage=usage, **kw)


async def test_no_more_than_the_limit_is_in_flight():
    in_flight, peak = 0, 0

    async def slow(req: ChatRequest) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return "ok"

    class Slow(ScriptedLLM):
        async def complete(self, req: ChatRequest) -> Completion:
            await slow(req)
            return await super().complete(req)

    layer = ConcurrencyLimited(Slow(default="ok"), 3)
    await asyncio.gather(*(layer.complete(request(doc=i)) for i in range(12)))
    assert peak == 3


async def test_each_stage_gets_its_model_and_an_explicit_one_is_kept():
    inner = ScriptedLLM(default="ok")
    layer = Shaped(inner, {"relevance": "small"}.get, default="large")
    for req in (request("relevance", model=None), request("reason", model=None), request("relevance", model="pinned")):
        await layer.complete(req)
    assert [r.model for r in inner.history] == ["small", "large", "pinned"]


async def test_completions_are_priced_and_counted_under_their_stage():
    ledger, seen = Ledger(), []
    ledger.subscribe(lambda stage, usage: seen.append((stage, usage.calls)))
    layer = Accounted(ScriptedLLM(replies=[answer(), answer(), answer()]), ledger, PRICES)
    first = await layer.complete(request("relevance"))
    await layer.complete(request("relevance"))
    await layer.complete(request("populate"))
    assert first.usage.cost_usd == pytest.approx(1.0 + 2 * 0.5)  # the completion carries its cost
    by_stage = ledger.by_stage()
    assert by_stage["relevance"].calls == 2 and by_stage["relevance"].cost_usd == pytest.approx(4.0)
    assert ledger.total().cost_usd == pytest.approx(6.0) and ledger.total().calls == 3
    assert seen == [("relevance", 1), ("relevance", 1), ("populate", 1)]


async def test_a_cached_reply_is_saved_money_not_spent():
    ledger = Ledger()
    layer = Accounted(ScriptedLLM(replies=[answer(from_cache=True)]), ledger, PRICES)
    await layer.complete(request())
    usage = ledger.total()
    assert usage.calls == 0 and usage.cost_usd == 0 and usage.cache_hits == 1
    assert usage.saved_usd == pytest.approx(2.0) and usage.saved_tokens == 1_500_000


async def test_calls_billed_before_a_failure_are_counted_and_the_error_goes_on():
    error = ProviderError("HTTP 500", status=500)
    error.usage = Usage(calls=2, prompt_tokens=1_000_000)
    ledger = Ledger()
    with pytest.raises(ProviderError):
        await Accounted(ScriptedLLM(replies=[error]), ledger, PRICES).complete(request())
    assert ledger.total().calls == 2 and ledger.total().cost_usd == pytest.approx(1.0)


async def test_every_call_is_logged_with_what_a_run_is_inspected_by(tmp_path):
    log = CallLog(tmp_path / "calls.jsonl")
    layer = Recorded(ScriptedLLM(replies=[answer("the note"), ProviderError("HTTP 503", status=503)]), log)
    await layer.complete(request("relevance", doc=4, round=2))
    with pytest.raises(ProviderError):
        await layer.complete(request("populate", doc=5))
    log.close()
    ok, failed = (json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines())
    assert (ok["stage"], ok["doc"], ok["round"], ok["prompt"], ok["prompt_hash"]) == ("relevance", 4, 2, "relevance", "h-relevance")
    assert ok["response"]["content"] == "the note" and ok["usage"]["prompt_tokens"] == 1_000_000
    assert ok["request_hash"] == request("relevance", doc=4, round=2).fingerprint()
    assert failed["stage"] == "populate" and failed["error"].startswith("ProviderError") and "refused" not in failed
    assert stat.S_IMODE((tmp_path / "calls.jsonl").stat().st_mode) == 0o600, "it holds the documents"


async def test_compact_logs_keep_a_templates_first_request_and_every_failed_one(tmp_path):
    log = CallLog(tmp_path / "calls.jsonl", detail="compact")
    refused = BudgetExceeded("over --max-cost")
    replies = [answer(), answer(), ProviderError("HTTP 500", status=500), refused]
    layer = Recorded(ScriptedLLM(replies=replies), log)
    for i in range(4):
        try:
            await layer.complete(request("relevance", doc=i))
        except (ProviderError, BudgetExceeded):
            pass
    log.close()
    rows = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert ["request" in r for r in rows] == [True, False, True, False], "first, repeat, failed, refused"
    assert all("response" in r for r in rows[:2]) and rows[3]["refused"] is True


async def test_meta_logs_keep_neither_requests_nor_replies(tmp_path):
    log = CallLog(tmp_path / "calls.jsonl", detail="meta")
    await Recorded(ScriptedLLM(replies=[answer("secret")]), log).complete(request(text="private document"))
    log.close()
    text = (tmp_path / "calls.jsonl").read_text()
    assert "secret" not in text and "private document" not in text
    assert json.loads(text)["usage"]["calls"] == 1


def test_a_log_without_a_path_writes_nothing(tmp_path):
    log = CallLog(None)
    log.write({"stage": "x"})
    log.close()
    assert list(tmp_path.iterdir()) == []


def test_usage_adds_up_with_its_events():
    a = replace(USAGE, events={"length": 1})
    b = replace(USAGE, events={"length": 2, "refusals": 1})
    total = a + b
    assert total.calls == 2 and total.events == {"length": 3, "refusals": 1}


async def test_an_earlier_runs_reply_answers_an_identical_request_as_a_cache_hit_and_the_rest_pass_on(tmp_path):
    inner = ScriptedLLM(default="fresh")
    cache = CallCache(tmp_path / "llm.sqlite")
    layer = Answered(inner, cache=cache, endpoint="http://a/v1")
    kept: list[tuple[str, str]] = []
    layer.earlier = {request(text="asked before").fingerprint(): (answer("earlier reply"), "k-earlier")}.get
    layer.record = lambda digest, stage, key: kept.append((digest, key))
    ledger = Ledger()
    top = Accounted(layer, ledger, PRICES)
    again = await top.complete(request(text="asked before"))
    new = await top.complete(request(text="never asked", round=2))
    assert again.content == "earlier reply" and again.from_cache and new.content == "fresh"
    assert len(inner.history) == 1 and ledger.total().calls == 1 and ledger.total().cache_hits == 1
    new_key = cache_key("http://a/v1", request(text="never asked", round=2))
    assert kept == [(request(text="asked before").fingerprint(), "k-earlier"),
                    (request(text="never asked", round=2).fingerprint(), new_key)], "each reply where the cache keeps it"
    assert cache.get(new_key).content == "fresh" and len(cache) == 1, "a reply is stored once, in the cache"
    assert sum(layer.replayed.values()) == 1 and layer.sent[("relevance", "1", 2)] == 1


async def test_no_request_asks_for_more_than_the_cap_and_the_fingerprint_is_of_the_capped_request():
    inner = ScriptedLLM(default="fine")
    layer = Shaped(Answered(inner), lambda stage: None, "m", max_tokens_cap=300)
    await layer.complete(request("relevance", model=None, max_tokens=1000))
    await layer.complete(request("schema", model=None, max_tokens=None))
    assert [r.max_tokens for r in inner.history] == [300, 300], "a request without a limit gets the cap too"
    wide = Shaped(inner, lambda stage: None, "m", max_tokens_cap=4096).shape(request("relevance", max_tokens=1000))
    narrow = layer.shape(request("relevance", max_tokens=1000))
    assert wide.fingerprint() != narrow.fingerprint()
