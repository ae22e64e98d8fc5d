import math

import pytest

from r3con.config import Settings
from r3con.errors import ConfigError
from r3con.llm import Ledger
from r3con.llm.embeddings import open_embedder
from r3con.llm.layers import CallLog
from r3con.testing._embeddings import vector


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
    from r3con.testing import FakeLLMServer

    with FakeLLMServer() as server:
        settings = Settings.resolve(env={}, base_url=server.base_url.replace("/v1", "/none"), embedding_model="m")
        async with open_embedder(settings, stage="rag-embed") as emb:
            assert emb is not None
            with pytest.raises(ConfigError, match="R3CON_EMBEDDING_MODEL"):
                await emb.embed(["x"])
