import pytest

from r3con.baselines import longcontext
from r3con.testing import FakeLLMServer

from ._helpers import CORPORA, check_outcome, logged_calls, run, task, transcript


@pytest.mark.parametrize("corpus", CORPORA)
async def test_runs_end_to_end(corpus, fake_server, tmp_path):
    outcome = await run(longcontext.method(), task(corpus), fake_server, tmp_path)
    check_outcome(outcome, fake_server, {"longcontext"})
    assert outcome.by_stage["longcontext"].calls == 1


async def test_fair_truncation_keeps_every_document_within_the_window(tmp_path):
    dracula = task("dracula")  # the slice ~10k tokens, the whole novel ~250k: over the window either way
    n = len(dracula.documents)
    window = min(32768, 4096 + sum(len(d.text) for d in dracula.documents) // 12)
    with FakeLLMServer(max_model_len=window) as server:
        outcome = await run(longcontext.method(), dracula, server, tmp_path)
        last = server.calls()[-1]
    log = transcript(outcome)
    assert log["truncation"] == "fair" and len(log["documents"]) == n
    assert all(d["kept_tokens"] > 0 for d in log["documents"])  # no document is dropped
    cut = [d for d in log["documents"] if d["truncated"]]
    assert cut and min(d["kept_tokens"] for d in cut) >= 0.8 * max(d["kept_tokens"] for d in cut)  # one cap
    whole = [d for d in log["documents"] if not d["truncated"]]
    # one cap for all: only the documents longer than every whole one are cut, and none is cut below 80% of it
    assert min(d["tokens"] for d in cut) > max(d["tokens"] for d in whole)
    assert all(d["tokens"] <= max(c["kept_tokens"] for c in cut) for d in whole)
    prompt = logged_calls(outcome)[0]["request"]["messages"][-1]["content"]
    assert all(f'<document number="{i}"' in prompt for i in range(1, n + 1))
    assert "only their beginnings are shown: Document" in prompt
    assert last["status"] == 200 and last["prompt_tokens"] <= window - 4096  # the answer's room is kept


async def test_head_truncation_keeps_the_first_documents(tmp_path):
    dracula = task("dracula")
    with FakeLLMServer(max_model_len=6144) as server:  # under the slice's ~10k tokens too
        outcome = await run(longcontext.method(longcontext.Options(truncation="head", max_tokens=1024)),
                            dracula, server, tmp_path)
        assert server.calls()[-1]["status"] == 200
    docs = transcript(outcome)["documents"]
    kept = [d["doc"] for d in docs if d["kept_tokens"]]
    assert kept == list(range(1, len(kept) + 1)) and len(kept) < len(dracula.documents)
    assert all(not d["truncated"] for d in docs[:len(kept) - 1])


async def test_a_collection_that_fits_is_sent_whole(fake_server, tmp_path):
    zh = task("loong-zh")  # ~16k tokens: fits the 32k window
    outcome = await run(longcontext.method(), zh, fake_server, tmp_path)
    assert not any(d["truncated"] for d in transcript(outcome)["documents"])
    prompt = logged_calls(outcome)[0]["request"]["messages"][-1]["content"]
    assert all(d.text in prompt for d in zh.documents)
