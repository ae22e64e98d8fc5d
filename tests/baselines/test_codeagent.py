import pytest

from r3con.baselines import codeagent
from r3con.testing import FakeLLMServer

from ._helpers import CORPORA, check_outcome, logged_calls, run, task, transcript


@pytest.mark.parametrize("corpus", CORPORA)
async def test_runs_end_to_end(corpus, fake_server, tmp_path):
    eval_task = task(corpus)
    outcome = await run(codeagent.method(), eval_task, fake_server, tmp_path)
    check_outcome(outcome, fake_server, {"codeagent"})
    steps = transcript(outcome)["steps"]
    calls = [c for c in logged_calls(outcome) if c["stage"] == "codeagent"]
    assert not outcome.capped and len(steps) == len(calls) and all(s["error"] is None for s in steps)
    # each step ran the code of its reply, and the loop ended at the step that called final_answer
    assert all(s["code"] and s["code"] in c["response"]["content"] for s, c in zip(steps, calls, strict=True))
    assert "final_answer(" in steps[-1]["code"]
    # the agent sees the raw documents through the variable, not in its prompt: what it prints of it is the corpus
    for step in steps:
        if step["code"].startswith("print(len(documents))"):
            assert step["observation"].splitlines()[0] == str(len(eval_task.documents))
    first = calls[0]["request"]["messages"]
    assert "`documents`" in first[0]["content"] and "20 steps" in first[0]["content"]
    assert eval_task.documents[0].text[:2000] not in first[1]["content"]


def test_defaults_follow_the_paper():
    assert codeagent.Options().max_steps == 20


async def test_step_cap_forces_a_plain_answer(tmp_path):
    with FakeLLMServer() as server:
        outcome = await run(codeagent.method(codeagent.Options(max_steps=1)), task("loong-zh"), server, tmp_path)
        modes = [c["mode"] for c in server.calls()]
    assert outcome.capped and modes == ["code", "final"]
    assert "Answer:" not in outcome.answer and outcome.answer.strip()
