import json

import pytest

from r3con.baselines import structrag
from r3con.testing import FakeLLMServer

from ._helpers import CORPORA, check_outcome, logged_calls, run, server_stages, task, transcript

STAGES = {"structrag-router", "structrag-structurize", "structrag-utilize"}


@pytest.mark.parametrize("corpus", CORPORA)
async def test_runs_end_to_end(corpus, fake_server, tmp_path):
    eval_task = task(corpus)
    outcome = await run(structrag.method(), eval_task, fake_server, tmp_path)
    check_outcome(outcome, fake_server, STAGES)
    log = transcript(outcome)
    stages = server_stages(fake_server)
    assert stages[0] == "structrag-router" and stages[-1] == "structrag-utilize"
    assert log["structure"] in structrag.TYPES
    # every document (or part of one) is structured on its own, in its own call
    assert stages.count("structrag-structurize") == log["parts"] >= len(eval_task.documents)
    structured_docs = {c["doc"] for c in fake_server.calls() if c["stage"] == "structrag-structurize"}
    assert structured_docs == {str(d.number) for d in eval_task.documents}
    saved = json.loads((outcome.run_dir / "structures.json").read_text())
    assert saved["structure"] == log["structure"] and saved["items"]
    utilize = [c for c in logged_calls(outcome) if c["stage"] == "structrag-utilize"][0]
    assert f"restructured as {log['structure']}" in utilize["request"]["messages"][-1]["content"]


@pytest.mark.parametrize(("reply", "expected"), [
    ("table\nbecause numbers are compared", "table"),
    ("**Graph** suits chains of relations; a table would not.", "graph"),
    ("I would pick the chunks option.", "chunks"),
    ("no idea", "chunks"),
])
def test_parse_route(reply, expected):
    assert structrag.parse_route(reply, structrag.TYPES, "chunks") == expected


async def test_the_router_choice_shapes_the_structurizer(tmp_path):
    with FakeLLMServer() as server:
        outcome = await run(structrag.method(structrag.Options(structures=("graph",))), task("loong-zh"),
                            server, tmp_path)
    assert transcript(outcome)["structure"] == "graph"
    prompts = [c["request"]["messages"][-1]["content"] for c in logged_calls(outcome)
               if c["stage"] == "structrag-structurize"]
    assert prompts and all("<structure>graph</structure>" in p and "(head; relation; tail)" in p for p in prompts)
