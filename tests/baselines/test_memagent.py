import pytest

from r3con.baselines import memagent

from ._helpers import CORPORA, check_outcome, logged_calls, run, server_stages, task, transcript


@pytest.mark.parametrize("corpus", CORPORA)
async def test_runs_end_to_end_with_a_bounded_memory(corpus, fake_server, tmp_path):
    options = memagent.Options(chunk_tokens=8000, memory_tokens=96)
    outcome = await run(memagent.method(options), task(corpus), fake_server, tmp_path)
    check_outcome(outcome, fake_server, {"memagent-read", "memagent-answer"})
    steps = transcript(outcome)["steps"]
    stages = server_stages(fake_server)
    # a memory cut at its bound may be asked again by the client's output check, so >= one call a step
    assert stages.count("memagent-read") >= len(steps) > 1 and stages[-1] == "memagent-answer"
    assert [s["step"] for s in steps] == list(range(1, len(steps) + 1))  # read in order, one chunk a call
    docs = [s["doc"] for s in steps]
    assert docs == sorted(docs)
    assert all(s["memory_tokens"] <= 96 for s in steps)  # the bound holds at every step
    # the memory kept at each step is what the model wrote for it (a reply of its reading calls, in order,
    # cut at the bound if it ran past it)
    reads = [c for c in logged_calls(outcome) if c["stage"] == "memagent-read"]
    replies = iter(" ".join(c["response"]["content"].split()) for c in reads)
    assert all(any(reply.startswith(" ".join(step["memory"].split())) for reply in replies) for step in steps)
    # each reading call carries only the previous memory, so prompts do not grow with the collection
    assert all(c["request"]["max_tokens"] == 96 for c in reads)
    for previous, call in zip(steps, reads[1:], strict=False):
        assert f"<memory>\n{previous['memory']}\n</memory>" in call["request"]["messages"][-1]["content"]


async def test_memory_is_overwritten_not_appended(fake_server, tmp_path):
    outcome = await run(memagent.method(memagent.Options(chunk_tokens=500, memory_tokens=48)),
                        task("loong-en"), fake_server, tmp_path)
    steps = transcript(outcome)["steps"]
    assert len(steps) > 15 and max(s["memory_tokens"] for s in steps) <= 48
    assert any(s["memory_tokens"] > 30 for s in steps)  # the scripted memory grows until the bound cuts it
