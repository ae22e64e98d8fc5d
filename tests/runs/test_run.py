"""A run you can hold (`r3con.start`): its events, its plan, a cancel and a resume, over real HTTP to the
scripted server."""

import asyncio
import json
import threading
from collections import Counter

import pytest

import r3con
from r3con.errors import RunCancelled
from r3con.testing import FakeLLMServer, FaultPlan

from ..conftest import r3con_cli

TASK = "Which people are named in the documents, and how old are they?"
TEXTS = [
    ("Registry", "Ann Lee is 34 years old. She lives in Oslo."),
    ("Letter", "Bob Stone, aged 41, wrote to Ann Lee about the harbour."),
    ("Weather", "It rained all week in the valley."),
    ("Minutes", "Carl Berg, 52, chaired the harbour board meeting in Bergen."),
    ("Note", "Dora Vik turned 29 in March and moved to Tromso."),
    ("Memo", "The ferry timetable changes in June."),
]


def _folder(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, (title, text) in enumerate(TEXTS, start=1):
        (folder / f"{i:02d}-{title.lower()}.txt").write_text(f"{title}\n\n{text}\n")
    return folder


def _settings(server, tmp_path, **fields):
    return r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path / "runs",
                                  cache_path=tmp_path / "cache" / "llm.sqlite", **fields)


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_call_events_are_the_call_log_and_the_usage(fake_server, tmp_path, clean_env):
    run = await r3con.start(TASK, [_folder(tmp_path)], _settings(fake_server, tmp_path))
    assert run.plan is not None and run.run_dir is not None and run.run_dir.is_dir()
    events = [e async for e in run.events()]
    result = await run.result()
    assert events[0].kind == "started" and events[-1].kind == "finished" and run.status == "finished"
    assert [e.kind for e in events].count("finished") == 1
    calls = [e for e in events if e.kind == "call"]
    logged = _lines(result.run_dir / "calls.jsonl")
    assert len(calls) == len(logged) > 0
    for event, line in zip(calls, logged, strict=True):
        assert (event.stage, event.doc, event.part, event.round) == (
            line["stage"], None if line.get("doc") is None else str(line["doc"]), line.get("part"), line.get("round"))
        assert event.prompt_tokens == line["usage"]["prompt_tokens"]
        assert event.completion_tokens == line["usage"]["completion_tokens"]
    usage = json.loads((result.run_dir / "usage.json").read_text())
    paid = [e for e in calls if e.source == "endpoint" and e.error is None]
    assert sum(e.prompt_tokens for e in paid) == usage["prompt_tokens"]
    assert sum(e.completion_tokens for e in paid) == usage["completion_tokens"]
    assert len(paid) == usage["calls"]
    assert sum(e.cost_usd or 0.0 for e in paid) == pytest.approx(usage["cost_usd"] or 0.0)
    # every event is JSON-safe, and says what it is
    for event in events:
        assert json.loads(json.dumps(event.to_dict()))["kind"] == event.kind
    stages = [(e.stage, e.state) for e in events if e.kind == "stage"]
    assert stages[0] == ("relevance", "started") and ("reason", "finished") in stages
    notes = [e for e in events if e.kind == "note"]
    assert {(e.doc, e.round) for e in notes} == {(p.key, r) for p in result.parts for r in (1, 2)}
    assert any(e.kind == "records" and e.count > 0 for e in events)


async def test_two_followers_and_a_late_one_see_the_same_events(fake_server, tmp_path, clean_env):
    run = await r3con.start(TASK, [_folder(tmp_path)], _settings(fake_server, tmp_path))

    async def follow():
        return [e.to_dict() for e in [e async for e in run.events()]]

    first, second = await asyncio.gather(follow(), follow())
    await run.result()
    late = await follow()
    assert first == second == late and first[-1]["kind"] == "finished"


async def test_the_plan_is_what_estimate_prints_and_the_run_makes(fake_server, tmp_path, clean_env):
    folder = _folder(tmp_path)
    run = await r3con.start(TASK, [folder], _settings(fake_server, tmp_path, rounds=2))
    result = await run.result()
    plan = run.plan.to_dict()
    printed = r3con_cli("estimate", TASK, str(folder), "--json", "--base-url", fake_server.base_url,
                        "--api-key", "x", "--rounds", "2", env={"R3CON_CACHE_PATH": str(tmp_path / "c2")})
    assert printed.returncode == 0, printed.stderr
    estimate = json.loads(printed.stdout)
    assert (plan["documents"], plan["parts"]) == (estimate["documents"], estimate["parts"]) == (6, 6)
    assert [(s["stage"], s["calls"]) for s in plan["stages"]] == [(s["stage"], s["calls"]) for s in estimate["stages"]]
    assert plan["endpoint"]["context_window"] == estimate["endpoint"]["context_window"]
    # the run's own first plan: the parts it split and the relevance calls it made
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert len(result.parts) == plan["parts"] and manifest["part_tokens"] == plan["part_tokens"]
    made = Counter(line["stage"] for line in _lines(result.run_dir / "calls.jsonl"))
    assert made["relevance"] == dict((s["stage"], s["calls"]) for s in plan["stages"])["relevance"]


async def test_a_cancelled_run_resumes_and_pays_nothing_twice(tmp_path, clean_env):
    folder = _folder(tmp_path)
    with FakeLLMServer(faults=FaultPlan.parse("delay=0.15")) as server:
        settings = _settings(server, tmp_path, concurrency=1)
        run = await r3con.start(TASK, [folder], settings)
        seen = 0
        async for event in run.events():
            if event.kind == "call" and event.stage == "relevance":
                seen += 1
                if seen == 4:
                    run.cancel()
        assert run.status == "cancelled"
        with pytest.raises(RunCancelled):
            await run.result()
        first = _lines(run.run_dir / "calls.jsonl")
        assert 4 <= len(first) < 12, "cancelled mid-relevance"
        resumed = await r3con.resume(run.run_dir)
        assert resumed.run_dir == run.run_dir
        result = await resumed.result()
    assert result.answer.strip()
    logged = _lines(run.run_dir / "calls.jsonl")
    paid = Counter(line["request_hash"] for line in logged if not line.get("from_cache") and "error" not in line)
    assert paid and max(paid.values()) == 1, "no answered request was sent twice"
    again = [line for line in logged[len(first):] if line["stage"] == "relevance" and line.get("round") == 1]
    assert sum(1 for line in again if line.get("from_cache")) >= 4, "the first attempt's reads served, not paid"


async def test_cancel_is_safe_from_another_thread(tmp_path, clean_env):
    with FakeLLMServer(faults=FaultPlan.parse("delay=0.1")) as server:
        run = await r3con.start(TASK, [_folder(tmp_path)], _settings(server, tmp_path, concurrency=1))
        threading.Timer(0.3, run.cancel).start()
        kinds = [e.kind async for e in run.events()]
    assert kinds[-1] == "cancelled" and "finished" not in kinds
    manifest = json.loads((run.run_dir / "manifest.json").read_text())
    assert manifest["task"] == TASK


async def test_several_runs_at_once_on_a_fresh_cache(fake_server, tmp_path, clean_env):
    folder = _folder(tmp_path)
    settings = _settings(fake_server, tmp_path)
    runs = await asyncio.gather(*(r3con.start(f"{TASK} ({i})", [folder], settings) for i in range(4)))
    results = await asyncio.gather(*(run.result() for run in runs))
    assert len({r.run_dir for r in results}) == 4 and all(r.answer.strip() for r in results)


async def test_a_start_that_cannot_begin_raises_and_leaves_no_folder(tmp_path, clean_env):
    settings = r3con.Settings.resolve(env={}, base_url="http://127.0.0.1:9/v1", api_key="x", out_dir=tmp_path / "runs",
                                      retries=0)
    folder = _folder(tmp_path)
    with pytest.raises(r3con.R3conError):
        await r3con.start(TASK, [folder], settings)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    with pytest.raises(r3con.InputError, match="the question is empty"):
        await r3con.start("  ", [folder], settings)


def test_ask_blocks_and_works_inside_a_running_loop(fake_server, tmp_path, clean_env):
    folder = _folder(tmp_path)
    plain = r3con.ask(TASK, folder, base_url=fake_server.base_url, api_key="x", out_dir=tmp_path / "a",
                      cache_path=tmp_path / "c.sqlite")

    async def in_a_notebook():  # a cell runs inside the kernel's running loop: asyncio.run would refuse
        return r3con.ask(TASK, [folder], base_url=fake_server.base_url, api_key="x", out_dir=tmp_path / "b",
                         cache_path=tmp_path / "c.sqlite")

    inside = asyncio.run(in_a_notebook())
    assert plain.answer == inside.answer and plain.answer.strip()


async def test_a_layer_of_the_users_sees_every_request_the_run_sends(fake_server, tmp_path, clean_env):
    from r3con.llm import Wrapper

    seen: list[str] = []

    class Counted(Wrapper):
        async def complete(self, request):
            seen.append(request.stage)
            return await self.inner.complete(request)

    run = await r3con.start(TASK, [_folder(tmp_path)], _settings(fake_server, tmp_path), layers=[Counted])
    calls = [e async for e in run.events() if e.kind == "call"]
    await run.result()
    assert seen == [e.stage for e in calls] and len(seen) > 6
