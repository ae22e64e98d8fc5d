import math

import pytest

from r3con.config import Settings
from r3con.errors import BudgetExceeded, ConfigError, ProviderError
from r3con.llm import Ledger, build_llm
from r3con.llm.layers.budget import CostCap
from r3con.llm.layers.calllog import CallLog
from r3con.llm.layers.retry import Retrier, RetryBudget, RetryPolicy
from r3con.llm.transport.embeddings import open_embedder
from r3con.testing import FakeLLMServer
from r3con.testing._embeddings import vector
from r3con.testing._faults import FaultPlan


def test_scripted_vectors_are_deterministic_unit_vectors_that_reflect_shared_words():
    a, b, c = vector("zinc shipment from Antwerp"), vector("the Antwerp zinc shipment"), vector("weather was mild")
    assert a == vector("zinc shipment from Antwerp") and len(a) == 256
    assert math.isclose(sum(x * x for x in a), 1.0)
    dot = lambda x, y: sum(p * q for p, q in zip(x, y, strict=True))  # noqa: E731
    assert dot(a, b) > dot(a, c)
    assert vector("") == [0.0] * 256


async def test_embeddings_go_through_the_endpoint_with_the_stage_header(fake_server, tmp_path):
    settings = Settings.resolve(env={}, base_url=fake_server.base_url, embedding_model="hash-embed")
    ledger = Ledger()
    async with open_embedder(settings, stage="rag-embed", ledger=ledger, log=CallLog(tmp_path / "calls.jsonl")) as emb:
        assert emb is not None
        emb.batch_size = 2
        vectors = await emb.embed(["alpha beta", "beta gamma", "delta", ""])
    assert vectors[0] == vector("alpha beta") and len(vectors) == 4
    calls = [c for c in fake_server.calls() if c["path"] == "/v1/embeddings"]
    assert [c["inputs"] for c in calls] == [2, 2] and {c["stage"] for c in calls} == {"rag-embed"}
    assert {c["model"] for c in calls} == {"hash-embed"}
    usage = ledger.by_stage()["rag-embed"]
    assert usage.calls == 2 and usage.prompt_tokens == 5  # words in the inputs
    assert len((tmp_path / "calls.jsonl").read_text().splitlines()) == 2


async def test_no_embedding_model_means_no_embedder(fake_server):
    async with open_embedder(Settings.resolve(env={}, base_url=fake_server.base_url), stage="x") as emb:
        assert emb is None
    assert not fake_server.calls()


def test_the_embedding_model_comes_from_the_environment():
    assert Settings.resolve(env={"R3CON_EMBEDDING_MODEL": "bge-m3"}).embedding_model == "bge-m3"
    assert Settings.resolve(env={}).embedding_model is None


async def test_an_endpoint_without_embeddings_is_a_config_error(tmp_path):
    with FakeLLMServer() as server:
        settings = Settings.resolve(env={}, base_url=server.base_url.replace("/v1", "/none"), embedding_model="m")
        async with open_embedder(settings, stage="rag-embed") as emb:
            assert emb is not None
            with pytest.raises(ConfigError, match="R3CON_EMBEDDING_MODEL"):
                await emb.embed(["x"])


def _faulty(spec: str):
    return FakeLLMServer(faults=FaultPlan.parse(spec))


async def test_transient_embeddings_failures_are_retried_and_counted(tmp_path):
    with _faulty("429=0.5,500=0.5,retry_after=0.01,max=1") as server:  # every request fails once, then answers
        settings = Settings.resolve(env={}, base_url=server.base_url, embedding_model="hash-embed", retry_base_s=0.01)
        ledger = Ledger()
        async with open_embedder(settings, stage="rag-embed", ledger=ledger) as emb:
            assert emb is not None
            emb.batch_size = 2
            vectors = await emb.embed(["alpha beta", "beta gamma", "delta"])
        statuses = [c.get("status") for c in server.calls() if c["path"] == "/v1/embeddings"]
    assert vectors == [vector("alpha beta"), vector("beta gamma"), vector("delta")]
    assert len(statuses) == 4 and statuses.count(200) == 2 and set(statuses) - {200} <= {429, 500}
    usage = ledger.by_stage()["rag-embed"]
    assert usage.calls == 2 and usage.events == {"retries": 2}


async def test_embeddings_spend_the_runs_retry_budget_and_then_fail_with_an_actionable_error(tmp_path):
    with _faulty("500=1,max=5") as server:
        settings = Settings.resolve(env={}, base_url=server.base_url, embedding_model="hash-embed")
        budget = RetryBudget(1)
        retrier = Retrier(RetryPolicy(retries=4, base_s=0.0), budget, server.base_url)
        log = CallLog(tmp_path / "calls.jsonl")
        async with open_embedder(settings, stage="rag-embed", log=log, retrier=retrier) as emb:
            assert emb is not None
            with pytest.raises(ProviderError, match="retry budget of 1 is spent.*raise --retries"):
                await emb.embed(["x"])
        log.close()
        attempts = [c for c in server.calls() if c["path"] == "/v1/embeddings"]
    assert budget.spent == 1 and len(attempts) == 2
    assert "retry budget" in (tmp_path / "calls.jsonl").read_text()


async def test_embeddings_count_against_max_cost_and_stop_before_passing_it(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text('{"hash-embed": {"input": 1000000, "output": 0}}')  # $1 a token: the cap binds at once
    with _faulty("") as server:
        settings = Settings.resolve(env={}, base_url=server.base_url, embedding_model="hash-embed", prices_file=prices)
        cap = CostCap(20.0)  # a reply may claim a token per byte sent, plus 8 a text: "one two" reserves $15
        async with open_embedder(settings, stage="rag-embed", cap=cap) as emb:
            assert emb is not None
            await emb.embed(["one two"])  # within the cap: 2 tokens
            spent = cap.spent_usd
            with pytest.raises(BudgetExceeded, match="--max-cost"):
                await emb.embed(["many words " * 10])
        calls = [c for c in server.calls() if c["path"] == "/v1/embeddings"]
    assert spent == 2.0 and cap.spent_usd == 2.0 and len(calls) == 1  # the refused request was never sent


async def test_max_cost_needs_a_price_for_the_embeddings_model(tmp_path, monkeypatch):
    from r3con.llm import pricing

    monkeypatch.setattr(pricing, "is_local_url", lambda url: False)  # as a provider's endpoint: not local, so not free
    with _faulty("") as server:
        settings = Settings.resolve(env={}, base_url=server.base_url, embedding_model="unpriced-embed")
        async with open_embedder(settings, stage="rag-embed", cap=CostCap(1.0)) as emb:
            assert emb is not None
            with pytest.raises(ConfigError, match="price for model 'unpriced-embed'.*--prices"):
                await emb.embed(["x"])
        assert not [c for c in server.calls() if c["path"] == "/v1/embeddings"]


async def test_a_runs_stack_hands_its_ledger_log_retries_and_cap_to_the_embedder(fake_server, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text('{"r3con-scripted": {"input": 1, "output": 1}, "hash-embed": {"input": 1, "output": 0}}')
    settings = Settings.resolve(env={}, base_url=fake_server.base_url, embedding_model="hash-embed",
                                max_cost_usd=5.0, prices_file=prices)
    async with build_llm(settings, calls_log=tmp_path / "calls.jsonl") as stack:
        assert stack.retrier is not None and stack.cost_cap is not None
        async with stack.embedder(settings, "relevance") as emb:
            assert emb is not None
            await emb.embed(["alpha beta gamma"])
        assert stack.cost_cap.spent_usd == pytest.approx(3 / 1_000_000)
        assert stack.ledger.by_stage()["relevance"].prompt_tokens == 3
    assert '"kind": "embeddings"' in (tmp_path / "calls.jsonl").read_text()


async def test_embeddings_are_served_from_the_runs_cache_the_second_time(fake_server, tmp_path):
    settings = Settings.resolve(env={}, base_url=fake_server.base_url, embedding_model="hash-embed",
                                cache_path=tmp_path / "llm.sqlite")
    vectors = []
    for _ in range(2):  # two runs sharing one cache file
        async with build_llm(settings) as stack, stack.embedder(settings, "relevance") as emb:
            assert emb is not None
            vectors.append(await emb.embed(["alpha beta gamma", "delta"]))
            usage = stack.ledger.by_stage()["relevance"]
    assert vectors[0] == vectors[1] == [vector("alpha beta gamma"), vector("delta")]
    assert len([c for c in fake_server.calls() if c["path"] == "/v1/embeddings"]) == 1
    assert (usage.calls, usage.cache_hits, usage.saved_tokens) == (0, 1, 4)
