"""The R3CON ablations do what their names claim, seen from the calls the scripted server receives."""

from pathlib import Path

import pytest

from r3con.config import Settings
from r3con.methods import run_method

from ._helpers import grounded, server_stages, task


async def _run(name, fake_server, tmp_path):
    eval_task = task("loong-zh")
    settings = Settings.resolve(env={}, base_url=fake_server.base_url)  # env={}: no call cache
    outcome = await run_method(name, eval_task.task_text, eval_task.documents, settings, tmp_path)
    return outcome, server_stages(fake_server), len(eval_task.documents)


@pytest.mark.parametrize(("name", "rounds"), [("r3con-rounds0", 0), ("r3con-rounds1", 1), ("r3con", 2),
                                               ("r3con-rounds3", 3)])
async def test_relevance_rounds(name, rounds, fake_server, tmp_path):
    outcome, stages, docs = await _run(name, fake_server, tmp_path)
    assert grounded(outcome.answer, task("loong-zh")), outcome.answer
    assert stages.count("relevance") == rounds * docs
    rounds_seen = {c["round"] for c in fake_server.calls() if c["stage"] == "relevance"}
    assert rounds_seen == {str(r) for r in range(1, rounds + 1)}
    assert stages.count("schema") >= 1 and stages.count("populate") >= docs and "reason" in stages
    notes = sorted(p.name for p in Path(outcome.run_dir).glob("notes/round-*.json"))
    assert notes == [f"round-{r}.json" for r in range(1, rounds + 1)]  # rounds 0: no notes at all


async def test_nostruct_goes_from_notes_to_the_agent(fake_server, tmp_path):
    outcome, stages, docs = await _run("r3con-nostruct", fake_server, tmp_path)
    assert grounded(outcome.answer, task("loong-zh")) and stages.count("relevance") == 2 * docs
    assert "schema" not in stages and "populate" not in stages
    modes = {c["mode"] for c in fake_server.calls() if c["stage"] == "reason"}
    assert "code" in modes
    assert not (Path(outcome.run_dir) / "records.json").exists()


async def test_direct_reasons_in_one_call_without_code(fake_server, tmp_path):
    outcome, stages, docs = await _run("r3con-direct", fake_server, tmp_path)
    assert grounded(outcome.answer, task("loong-zh")) and stages.count("relevance") == 2 * docs and "populate" in stages
    reason = [c for c in fake_server.calls() if c["stage"] == "reason"]
    assert len(reason) == 1 and reason[0]["mode"] == "direct"
