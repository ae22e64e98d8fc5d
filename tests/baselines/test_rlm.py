import pytest

from r3con.baselines import rlm

from ._helpers import CORPORA, check_outcome, logged_calls, run, server_stages, task, transcript


@pytest.mark.parametrize("corpus", CORPORA)
async def test_runs_end_to_end_with_sub_calls(corpus, fake_server, tmp_path):
    eval_task = task(corpus)
    outcome = await run(rlm.method(), eval_task, fake_server, tmp_path)
    check_outcome(outcome, fake_server, {"rlm", "rlm-sub"})
    stages = server_stages(fake_server)
    batches = -(-len(eval_task.documents) // 8)  # the scripted code asks about 8 documents a sub-call
    assert stages.count("rlm-sub") == batches + 1 == transcript(outcome)["sub_calls"]
    assert stages.count("rlm") == 2 and not outcome.capped
    # the root never saw the documents in its prompt; the sub-calls did
    calls = logged_calls(outcome)
    root = [c for c in calls if c["stage"] == "rlm"]
    sub = [c for c in calls if c["stage"] == "rlm-sub"]
    sample = eval_task.documents[0].text[:300]
    assert all(sample not in m["content"] for c in root for m in c["request"]["messages"])
    assert any(sample in c["request"]["messages"][-1]["content"] for c in sub)
    assert "30 turns" in root[0]["request"]["messages"][0]["content"]


def test_defaults_follow_the_paper():
    options = rlm.Options()
    assert options.max_iterations == 30


class _FakeRun:
    window = 4096

    def __init__(self):
        self.asked = []

    async def ask(self, stage, prompt, *, max_tokens):
        self.asked.append((stage, prompt.text))
        return "sub answer"


async def test_sub_calls_are_bounded_and_too_long_prompts_raise():
    fake = _FakeRun()
    sub = rlm._SubModel(fake, rlm.Options(sub_max_tokens=1024, max_sub_calls=2))
    assert await sub.batched(["a", "b"]) == ["sub answer", "sub answer"]
    assert fake.asked == [("rlm-sub", "a"), ("rlm-sub", "b")]
    with pytest.raises(RuntimeError, match="limit of 2 sub-LLM calls"):
        await sub.query("c")
    with pytest.raises(ValueError, match="smaller slice"):
        await rlm._SubModel(fake, rlm.Options(sub_max_tokens=1024)).query("word " * 5000)
    with pytest.raises(TypeError):
        await sub.batched("not a list")
