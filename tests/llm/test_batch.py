import asyncio
import json

import pytest

import r3con
from r3con.llm.pricing import Price, PriceTable
from r3con.llm.transport.batch import Batched, custom_id
from r3con.llm.transport.client import OpenAIChat
from r3con.llm.types import ChatRequest, Message, Usage
from r3con.pipeline.method import run
from r3con.testing import Behaviour, FakeLLMServer
from r3con.testing._batch import headers_from_custom_id

TASK = "Who wrote to Bob Stone?"


def note_request(n: int) -> ChatRequest:
    doc = f'<document number="{n}" title="Letter {n}">\nAnn Lee wrote to Bob Stone on day {n}.\n</document>'
    return ChatRequest(messages=(Message("system", "Read."), Message("user", f"{doc}\n\n<task>\n{TASK}\n</task>")),
                       stage="relevance", doc=n, round=1, max_tokens=200, model="r3con-scripted")


def batched(server: FakeLLMServer, state, **kwargs) -> tuple[OpenAIChat, Batched]:
    settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x")
    base = OpenAIChat(settings)
    return base, Batched(base, state, poll_s=0.02, window_s=0.05, **kwargs)


def test_custom_ids_carry_the_stage_headers():
    cid = custom_id(note_request(3), 7)
    assert cid == "relevance||3||1|7"
    assert headers_from_custom_id(cid) == {"X-R3con-Stage": "relevance", "X-R3con-Doc": "3", "X-R3con-Round": "1"}


async def test_concurrent_calls_go_out_as_one_batch(tmp_path):
    state = tmp_path / "batches.json"
    with FakeLLMServer(behaviour=Behaviour(batch_delay_s=0.05)) as server:
        base, layer = batched(server, state)
        try:
            completions = await asyncio.gather(*(layer.complete(note_request(n)) for n in range(1, 6)))
        finally:
            await base.aclose()
        assert len(server.batches.batches) == 1
        (batch_id,) = server.batches.batches
        chat = [c for c in server.calls() if c.get("status") == 200]
    assert len(chat) == 5 and sorted(c["doc"] for c in chat) == ["1", "2", "3", "4", "5"]
    assert all(c.raw["batch_id"] == batch_id for c in completions)
    assert all("Ann Lee wrote to Bob Stone" in c.content for c in completions)
    for n, c in enumerate(completions, start=1):
        assert f"day {n}" in c.content, "each call gets the answer to its own request"
    recorded = json.loads(state.read_text())["batches"]
    assert recorded[0]["id"] == batch_id and recorded[0]["status"] == "completed"
    assert set(recorded[0]["requests"]) == {note_request(n).fingerprint() for n in range(1, 6)}


async def test_other_stages_are_not_batched(tmp_path):
    with FakeLLMServer() as server:
        base, layer = batched(server, tmp_path / "batches.json")
        try:
            schema_call = ChatRequest(messages=(Message("user", f"<task>\n{TASK}\n</task>"),), stage="schema",
                                      model="r3con-scripted")
            completion = await layer.complete(schema_call)
        finally:
            await base.aclose()
        assert server.batches.batches == {} and "batch_id" not in completion.raw


async def test_an_interrupted_run_reattaches_to_its_batch_instead_of_resubmitting(tmp_path):
    state = tmp_path / "batches.json"
    with FakeLLMServer(behaviour=Behaviour(batch_delay_s=0.6)) as server:
        base, layer = batched(server, state)
        first = asyncio.ensure_future(asyncio.gather(*(layer.complete(note_request(n)) for n in range(1, 4))))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if state.exists():
                break
        assert state.exists(), "the batch id is on disk before the results are"
        first.cancel()  # the interruption: the process dies while the batch is in progress
        with pytest.raises(asyncio.CancelledError):
            await first
        await base.aclose()

        base, layer = batched(server, state)  # a new process, reading the same run folder
        try:
            completions = await asyncio.gather(*(layer.complete(note_request(n)) for n in range(1, 4)))
        finally:
            await base.aclose()
        assert len(server.batches.batches) == 1, "nothing was submitted again"
        assert len([c for c in server.calls() if c.get("status") == 200]) == 3
    assert all("Ann Lee" in c.content for c in completions)


def test_batched_calls_cost_the_batch_discount():
    prices = PriceTable({"m": Price(input=1.0, output=2.0)})
    usage = Usage(calls=1, prompt_tokens=1_000_000, completion_tokens=1_000_000)
    assert prices.cost("m", usage) == pytest.approx(3.0)
    assert prices.cost("m", usage, batch=True) == pytest.approx(1.5)


async def test_a_whole_run_in_batch_mode(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"r3con-scripted": {"input": 1.0, "output": 2.0}}))
    texts = [(f"Letter {i}", f"Ann Lee wrote to Bob Stone from Oslo on day {i}.") for i in range(1, 11)]
    with FakeLLMServer(behaviour=Behaviour(batch_delay_s=0.02)) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path / "runs",
                                          cache=False, batch=True, batch_poll_s=0.02, prices_file=prices)
        result = await run(TASK, r3con.documents_from_texts(texts), settings)
        batches = list(server.batches.batches.values())
    assert "Ann Lee" in result.answer and not result.degraded
    # one job a stage: round 2 sends no cache probes ahead of the rest in batch mode
    assert [b["request_counts"]["total"] for b in batches] == [10, 10, 10], "round 1, round 2, population"
    assert (tmp_path / "runs" / "batches.json").is_file()
    direct = r3con.llm.pricing.PriceTable.load(prices).cost("r3con-scripted", result.by_stage["relevance"])
    assert result.by_stage["relevance"].cost_usd == pytest.approx(direct / 2, rel=1e-6)


async def test_a_request_that_failed_inside_a_batch_goes_into_a_new_batch_when_retried(tmp_path):
    from r3con.errors import ProviderError
    from r3con.testing import FaultPlan

    with FakeLLMServer(behaviour=Behaviour(batch_delay_s=0.02), faults=FaultPlan(rate_500=1.0, max_faults_per_request=1)) as server:
        base, layer = batched(server, tmp_path / "batches.json")
        try:
            with pytest.raises(ProviderError, match="HTTP 500") as caught:
                await layer.complete(note_request(1))
            assert caught.value.status == 500
            completion = await layer.complete(note_request(1))  # what the retry layer does
        finally:
            await base.aclose()
        assert len(server.batches.batches) == 2
    assert "Ann Lee" in completion.content
