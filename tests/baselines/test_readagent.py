import pytest

from r3con.baselines import readagent

from ._helpers import CORPORA, check_outcome, logged_calls, run, server_stages, task, transcript

STAGES = {"readagent-gist", "readagent-lookup", "readagent-answer"}


@pytest.mark.parametrize("corpus", CORPORA)
async def test_runs_end_to_end(corpus, fake_server, tmp_path):
    options = readagent.Options(page_tokens=3000)
    outcome = await run(readagent.method(options), task(corpus), fake_server, tmp_path)
    check_outcome(outcome, fake_server, STAGES)
    log = transcript(outcome)
    stages = server_stages(fake_server)
    assert stages.count("readagent-gist") == log["pages"] == len(log["gists"]) > 1
    assert stages[-2:] == ["readagent-lookup", "readagent-answer"]
    assert 1 <= len(log["looked_up"]) <= options.max_lookups and log["restored"]
    calls = logged_calls(outcome)
    gist_prompts = [c["request"]["messages"][-1]["content"] for c in calls if c["stage"] == "readagent-gist"]
    assert all(task(corpus).task_text[:60] not in p for p in gist_prompts)  # gists are made without the task
    answer_prompt = [c for c in calls if c["stage"] == "readagent-answer"][0]["request"]["messages"][-1]["content"]
    assert answer_prompt.count("<page number=") == len(log["restored"])
    assert answer_prompt.count("<gist page=") == log["pages"] - len(log["restored"])


@pytest.mark.parametrize(("reply", "expected"), [
    ("I want to look up Page [8, 12] to answer.", [8, 12]),
    ("Pages 3 and 3 again, then 40 (out of range) and 5", [3, 5]),
    ("Reading 2 pages: I want to look up Page [7]", [7]),
    ("none", []),
])
def test_parse_pages(reply, expected):
    assert readagent.parse_pages(reply, pages=20, limit=5) == expected
