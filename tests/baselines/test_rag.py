import pytest

from r3con.baselines import longcontext, rag, raptor
from r3con.errors import ConfigError
from r3con.tokens import estimate_tokens

from ._helpers import CORPORA, check_outcome, logged_calls, run, server_stages, task, transcript


@pytest.mark.parametrize("corpus", CORPORA)
async def test_runs_end_to_end_with_bm25_only(corpus, fake_server, tmp_path):
    outcome = await run(rag.method(), task(corpus), fake_server, tmp_path)
    check_outcome(outcome, fake_server, {"rag-answer"})
    assert server_stages(fake_server, "/v1/embeddings") == []
    log = transcript(outcome)
    assert log["retrievers"] == ["bm25"] and "rag-embed" not in outcome.by_stage
    assert 0 < len(log["retrieved"]) <= rag.Options().top_k


@pytest.mark.parametrize("corpus", CORPORA)
async def test_dense_retrieval_uses_the_embeddings_endpoint(corpus, fake_server, tmp_path):
    outcome = await run(rag.method(), task(corpus), fake_server, tmp_path, embedding_model="hash-embed")
    check_outcome(outcome, fake_server, {"rag-answer"})
    embed_calls = [c for c in fake_server.calls() if c["path"] == "/v1/embeddings"]
    log = transcript(outcome)
    assert embed_calls and all(c["stage"] == "rag-embed" and c["model"] == "hash-embed" for c in embed_calls)
    assert sum(c["inputs"] for c in embed_calls) == log["chunks"] + 1  # every chunk, and the task
    assert log["retrievers"] == ["bm25", "dense"]
    assert outcome.by_stage["rag-embed"].calls == len(embed_calls) and outcome.by_stage["rag-embed"].prompt_tokens > 0
    assert any(c.get("stage") == "rag-embed" for c in logged_calls(outcome))


async def test_retrieved_text_respects_the_token_budget(fake_server, tmp_path):
    options = rag.Options(chunk_tokens=200, top_k=100, budget_tokens=1000)
    outcome = await run(rag.method(options), task("dracula"), fake_server, tmp_path)
    log = transcript(outcome)
    assert sum(r["tokens"] for r in log["retrieved"]) <= 1000 and len(log["retrieved"]) >= 4
    prompt = logged_calls(outcome)[0]["request"]["messages"][-1]["content"]
    assert prompt.count("<passage ") == len(log["retrieved"])
    assert estimate_tokens(prompt) < 1000 + 800


async def test_retrieval_finds_the_passage_that_answers(fake_server, tmp_path):
    """BM25 ranks the chunk holding the task's rare words first."""
    from r3con.corpus.documents import documents_from_texts

    docs = documents_from_texts([("filler", "The weather was mild and nothing happened. " * 200),
                                 ("ledger", "The quarterly zinc shipment from Antwerp totalled 412 tonnes."),
                                 ("more filler", "People walked about the town and talked. " * 200)])
    settings_task = "How many tonnes did the zinc shipment from Antwerp total?"
    from r3con.config import Settings

    settings = Settings.resolve(env={}, base_url=fake_server.base_url)
    outcome = await rag.method(rag.Options(chunk_tokens=100, top_k=2))(settings_task, docs, settings, tmp_path)
    assert transcript(outcome)["retrieved"][0]["doc"] == 2
    (asked,) = [c for c in logged_calls(outcome) if c["stage"] == "rag-answer"]
    assert "zinc shipment from Antwerp totalled 412 tonnes" in asked["request"]["messages"][-1]["content"], \
        "the reader is given the passage"


def test_options_that_cannot_work_are_refused():
    with pytest.raises(ConfigError, match="rag.Options.top_k must be positive"):
        rag.method(rag.Options(top_k=0))
    with pytest.raises(ConfigError, match="raptor.Options.chunk_tokens"):
        raptor.method(raptor.Options(chunk_tokens=-1))
    with pytest.raises(ConfigError, match="'fair' or 'head'"):
        longcontext.method(longcontext.Options(truncation="middle"))  # type: ignore[arg-type]
