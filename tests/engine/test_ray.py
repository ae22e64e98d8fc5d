"""`--engine ray` on a local Ray cluster: the in-process run's results, document affinity, and faults.

Every run goes over real HTTP to the scripted server; a fresh server per run, so that its simulated
prefix cache (which steers the calls' placement) starts empty for each engine alike."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import r3con
from r3con.pipeline.method import run
from r3con.testing import FakeLLMServer, FaultPlan

from ..conftest import cli_in_process

TASK = "Which people are named, and how old is each?"
PEOPLE = ["Ann Lee", "Bob Stone", "Cara Diaz", "Dan Moss", "Eve Hart", "Finn Cole", "Gus Park", "Hana Ito"]
SAME = ("notes/round-1.json", "notes/round-2.json", "schema.json", "records.json", "answer.txt")


def _texts() -> list[tuple[str, str]]:
    return [(f"Record {i}", f"{name} is {30 + i} years old and works in Oslo. The weather was mild.")
            for i, name in enumerate(PEOPLE)]


def _settings(server: FakeLLMServer, tmp_path: Path, engine: str, **more) -> r3con.Settings:
    return r3con.Settings.resolve(env={}, base_url=server.base_url, out_dir=tmp_path / "runs", temperature=0,
                                  cache_path=tmp_path / f"{engine}.sqlite", engine=engine, **more)


def _worker_pids() -> set[int]:
    """The processes of the engine's Ray actors (Linux: their process title names the class)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(b"ray::_Worker"):
                    pids.add(int(entry.name))
            except OSError:
                continue
    return pids


async def test_ray_gives_the_in_process_runs_notes_records_and_answer_byte_for_byte(ray_cluster, tmp_path):
    with FakeLLMServer() as server:
        local = await run(TASK, r3con.documents_from_texts(_texts()), _settings(server, tmp_path, "local"))
    with FakeLLMServer() as server:
        remote = await run(TASK, r3con.documents_from_texts(_texts()), _settings(server, tmp_path, "ray"))
        served = server.calls()
    assert remote.records and remote.answer.strip() and not remote.degraded
    for name in SAME:
        assert (remote.run_dir / name).read_bytes() == (local.run_dir / name).read_bytes(), name
    assert remote.usage.calls == local.usage.calls and remote.usage.prompt_tokens == local.usage.prompt_tokens
    manifest = json.loads((remote.run_dir / "manifest.json").read_text())
    engine = manifest["engine"]
    assert engine["engine"] == "ray" and engine["workers"] == 2 and engine["cpus"] == 2
    workers = engine["per_worker"]
    assert sum(w["calls"] for w in workers) == remote.usage.calls == len(served)
    assert all(w["calls"] > 0 for w in workers), "both workers took documents"
    # affinity: each document's calls (both rounds, population) went to one worker
    assert sum(w["documents"] for w in workers) == len(PEOPLE)
    assert json.loads((remote.run_dir / "usage.json").read_text())["by_worker"] == workers
    assert "engine" not in json.loads((local.run_dir / "manifest.json").read_text())


async def test_the_notes_are_selected_on_the_workers_as_in_process_byte_for_byte(ray_cluster, tmp_path):
    with FakeLLMServer() as server:
        local = await run(TASK, r3con.documents_from_texts(_texts()),
                          _settings(server, tmp_path, "local", notes_budget_tokens=60))
    with FakeLLMServer() as server:
        remote = await run(TASK, r3con.documents_from_texts(_texts()),
                           _settings(server, tmp_path, "ray", notes_budget_tokens=60))
    for name in ("notes/shown-2.jsonl", "notes/shown-populate.jsonl"):
        shown = [json.loads(line) for line in (local.run_dir / name).read_text().splitlines()]
        assert len(shown) == len(PEOPLE) and all(s["why"] == "selected" for s in shown), "the budget applied"
    for name in (*SAME, "notes/shown-2.jsonl", "notes/shown-populate.jsonl"):
        assert (remote.run_dir / name).read_bytes() == (local.run_dir / name).read_bytes(), name
    workers = json.loads((remote.run_dir / "manifest.json").read_text())["engine"]["per_worker"]
    # round 2's reads and population's (each document has a final note) had their notes chosen on the workers, and
    # the final notes' two: the choice for the task (the schema's and the answer's) and population's head
    assert sum(w["selections"] for w in workers) == 2 * len(PEOPLE) + 2
    assert all(w["selections"] > 0 for w in workers), "spread over both"


async def test_a_pool_keeps_each_documents_calls_on_one_endpoint_across_rounds_and_stages(ray_cluster, tmp_path):
    with FakeLLMServer() as first, FakeLLMServer() as second:
        settings = r3con.Settings.resolve(env={}, base_urls=(first.base_url, second.base_url), engine="ray",
                                          out_dir=tmp_path / "runs", cache_path=tmp_path / "c.sqlite")
        result = await run(TASK, r3con.documents_from_texts(_texts()), settings)
        calls = [[c for c in s.calls() if c.get("path", "").endswith("/chat/completions")] for s in (first, second)]
        docs = [{str(c["doc"]) for c in served if c["stage"] in ("relevance", "populate")} for served in calls]
    assert not result.degraded and result.records
    assert docs[0] and docs[1], "both endpoints served documents"
    assert not docs[0] & docs[1], "no document's calls were split between the endpoints"
    assert docs[0] | docs[1] == {str(i) for i in range(1, len(PEOPLE) + 1)}
    usage = json.loads((result.run_dir / "usage.json").read_text())
    by_url = {e["base_url"]: e for e in usage["by_endpoint"]}  # what the workers' pools did, summed
    assert [by_url[s.base_url]["calls"] for s in (first, second)] == [len(served) for served in calls]
    assert sum(e["documents"] for e in usage["by_endpoint"]) == len(PEOPLE)


async def _ray_run_under_way(server: FakeLLMServer, tmp_path: Path) -> asyncio.Future:
    """A Ray run (two calls in flight) started, once the server has answered four relevance calls."""
    running = asyncio.ensure_future(run(TASK, r3con.documents_from_texts(_texts()),
                                        _settings(server, tmp_path, "ray", concurrency=2)))
    deadline = time.monotonic() + 60
    while sum(1 for c in server.calls() if c["stage"] == "relevance" and c["status"] == 200) < 4:
        assert not running.done() and time.monotonic() < deadline, "the run made no progress"
        await asyncio.sleep(0.01)
    return running


async def test_a_worker_killed_mid_round_its_documents_complete_and_no_answered_call_is_paid_twice(
        ray_cluster, tmp_path):
    if not Path("/proc/self/cmdline").exists():
        pytest.skip("finds the workers' processes through /proc (Linux)")
    with FakeLLMServer() as server:
        reference = await run(TASK, r3con.documents_from_texts(_texts()), _settings(server, tmp_path, "local"))
    before = _worker_pids()
    with FakeLLMServer(faults=FaultPlan(delay_s=0.1)) as server:
        running = await _ray_run_under_way(server, tmp_path)
        victim = min(_worker_pids() - before)
        killed_at = time.time()
        os.kill(victim, signal.SIGKILL)
        result = await running
        served = server.calls()
    assert victim not in _worker_pids()
    assert not result.degraded, "the killed worker's documents were answered all the same"
    for name in SAME:
        assert (result.run_dir / name).read_bytes() == (reference.run_dir / name).read_bytes(), name
    answered = Counter(c["request_hash"] for c in served if c["status"] == 200)
    twice = {h for h, n in answered.items() if n > 1}
    # only a call in flight on the killed worker (its reply lost with it) may be asked again: at most
    # the worker's share of the calls in flight (concurrency 2), and only ones sent before the kill. The
    # server logs a call when it answers but stamps it when it reads the request: a call in flight at the
    # kill is logged after it, so it is told by its stamp (a quarter second for the server's thread to
    # read a request already sent)
    assert len(twice) <= 2, twice
    assert twice <= {c["request_hash"] for c in served if c["time"] <= killed_at + 0.25}


async def test_a_worker_gone_for_good_hands_its_documents_to_the_next(ray_cluster, tmp_path):
    import ray

    with FakeLLMServer() as server:
        reference = await run(TASK, r3con.documents_from_texts(_texts()), _settings(server, tmp_path, "local"))
    before = set(ray.util.list_named_actors())
    with FakeLLMServer(faults=FaultPlan(delay_s=0.1)) as server:
        running = await _ray_run_under_way(server, tmp_path)
        name = min(set(ray.util.list_named_actors()) - before)
        ray.kill(ray.get_actor(name), no_restart=True)  # as a node lost: Ray cannot bring it back
        result = await running
        served = server.calls()
    assert not result.degraded
    for file in SAME:
        assert (result.run_dir / file).read_bytes() == (reference.run_dir / file).read_bytes(), file
    workers = json.loads((result.run_dir / "manifest.json").read_text())["engine"]["per_worker"]
    assert [w["lost"] for w in workers] == [name.endswith("-0"), name.endswith("-1")]
    answered = Counter(c["request_hash"] for c in served if c["status"] == 200)
    assert sum(n - 1 for n in answered.values()) <= 2, "only calls in flight on the lost worker asked again"


def _corpus(tmp_path):
    """The test texts as files, one a document, in tmp_path/docs."""
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for i, (title, text) in enumerate(_texts()):
        (corpus / f"{i:02d}.txt").write_text(f"{title}\n\n{text}")
    return corpus


def _driver_env() -> dict[str, str]:
    """A driver process's environment: no r3con settings of ours, the cluster joined as a user's would."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_")) and k != "RAY_ADDRESS"}


def test_the_driver_killed_then_resumed_on_the_cluster_repeats_no_answered_call(ray_cluster, tmp_path):
    corpus = _corpus(tmp_path)
    # the cluster's own variables (its token authentication) stay: the driver joins it as a user's would
    env = _driver_env()
    with FakeLLMServer(faults=FaultPlan(delay_s=0.1)) as server:
        args = ["run", TASK, str(corpus), "--base-url", server.base_url, "--out", str(tmp_path / "runs"),
                "--cache", str(tmp_path / "c.sqlite"), "--concurrency", "2", "--json", "--quiet",
                "--engine", "ray", "--ray-address", ray_cluster]
        driver = subprocess.Popen([sys.executable, "-m", "r3con", *args], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while sum(1 for c in server.calls() if c["stage"] == "relevance" and c["status"] == 200) < 5:
                assert driver.poll() is None, driver.stderr.read() if driver.stderr else ""
                assert time.monotonic() < deadline, "the run made no progress"
                time.sleep(0.01)
            driver.send_signal(signal.SIGKILL)
            driver.wait(timeout=30)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
            if driver.stderr:
                driver.stderr.close()
        before = server.calls()
        (run_dir,) = (tmp_path / "runs").iterdir()
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["settings"]["engine"] == "ray"
        resumed = cli_in_process("run", "--resume", str(run_dir), "--base-url", server.base_url, "--json", "--quiet")
        assert resumed.returncode == 0, resumed.stderr
        after = server.calls()[len(before):]
    ok = [c["request_hash"] for c in before if c["status"] == 200]
    repeated = {c["request_hash"] for c in after} & set(ok)
    assert len(repeated) <= 2, repeated  # only calls in flight when the driver died
    assert {c["stage"] for c in after} >= {"schema", "populate", "reason"}
    result = json.loads(resumed.stdout)
    assert result["degraded"] == [] and (run_dir / "answer.txt").is_file()
    assert json.loads((run_dir / "manifest.json").read_text())["engine"]["workers"] == 2


def test_a_worker_killed_under_json_leaves_stdout_the_json_alone_and_rays_messages_in_the_runs_log(
        ray_cluster, tmp_path):
    if not Path("/proc/self/cmdline").exists():
        pytest.skip("finds the workers' processes through /proc (Linux)")
    corpus = _corpus(tmp_path)
    before = _worker_pids()
    with FakeLLMServer(faults=FaultPlan(delay_s=0.1)) as server:
        driver = subprocess.Popen(
            [sys.executable, "-m", "r3con", "run", TASK, str(corpus), "--base-url", server.base_url, "--json",
             "--quiet", "--no-cache", "--concurrency", "2", "--out", str(tmp_path / "runs"), "--engine", "ray",
             "--ray-address", ray_cluster], env=_driver_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while len(_worker_pids() - before) < 2 or sum(1 for c in server.calls() if c["status"] == 200) < 3:
                assert driver.poll() is None and time.monotonic() < deadline, "the run made no progress"
                time.sleep(0.01)
            os.kill(min(_worker_pids() - before), signal.SIGKILL)  # Ray restarts it and sends its calls again
            out, err = driver.communicate(timeout=120)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.communicate()
    assert driver.returncode == 0, err
    result = json.loads(out)  # stdout holds the JSON object and nothing else: no "(raylet) ..." line before it
    assert result["degraded"] == [] and "(raylet)" not in err and "Token authentication" not in err
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "worker died" in (run_dir / "ray.log").read_text().lower()
    said = " ".join(err.split())  # the warning as one line, however the terminal's width wrapped it
    assert said.count("a Ray worker died during the run and was restarted") == 1, err
    assert f"Ray's messages are in {run_dir / 'ray.log'}" in said, err


def test_sigterm_stops_a_ray_run_cleanly_and_says_how_to_resume(ray_cluster, tmp_path):
    corpus = _corpus(tmp_path)
    env = _driver_env()
    with FakeLLMServer(faults=FaultPlan(delay_s=0.1)) as server:
        driver = subprocess.Popen(
            [sys.executable, "-m", "r3con", "run", TASK, str(corpus), "--base-url", server.base_url, "--quiet",
             "--out", str(tmp_path / "runs"), "--engine", "ray", "--ray-address", ray_cluster],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while sum(1 for c in server.calls() if c["status"] == 200) < 4 and time.monotonic() < deadline:
            assert driver.poll() is None
            time.sleep(0.01)
        while not any(f.stat().st_size for f in (tmp_path / "runs").glob("*/calls.jsonl")):  # in the driver's record
            assert driver.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        driver.send_signal(signal.SIGTERM)  # ray.init's own handler would exit 15 without a word
        _, err = driver.communicate(timeout=60)
    assert driver.returncode == 143, err
    (folder,) = (tmp_path / "runs").iterdir()
    assert f"continue with r3con run --resume {folder}" in err


def _notes_and_queries(count: int, reads: int):
    """`count` near-duplicate notes (every one scores alike: the ranking reads far), and `reads` queries."""
    from r3con.notes.selection import NoteRef, NotesQuery

    refs = [NoteRef(str(i), f"Record {i}", f"Person {i} is {20 + i % 50} years old and works in Oslo.")
            for i in range(1, count + 1)]
    step = count // reads
    return refs, [NotesQuery(f"{TASK}\n{refs[i].text}", refs[i].label, top=3) for i in range(0, step * reads, step)]


async def _made_here(refs, budget, queries):
    from r3con.notes.selection import NotesSelector

    selector = NotesSelector(refs, budget)
    return [await selector.select(q.query, q.exclude, compact=True, top=q.top) for q in queries]


async def test_a_selection_batch_survives_a_worker_killed_mid_way_and_one_gone_for_good(ray_cluster, tmp_path):
    import ray

    from r3con.engine import _ray
    from r3con.notes.selection import NotesSelector

    refs, queries = _notes_and_queries(4000, 1200)  # five batches of a few hundred reads, 1.5 ms a read
    expected = await _made_here(refs, 600, queries)
    driver = NotesSelector(refs, 600)
    settings = r3con.Settings.resolve(env={}, base_url="http://127.0.0.1:9/v1", engine="ray", out_dir=tmp_path)
    async with _ray.workers(settings) as remote:
        first = remote.to_dict()["per_worker"][0]["pid"]
        selecting = asyncio.ensure_future(remote.select_many(refs, 600, queries))
        while not remote.to_dict()["per_worker"][0]["selections"]:  # its first batch back, its next in flight
            await asyncio.sleep(0.005)
        assert not selecting.done()
        os.kill(first, signal.SIGKILL)  # Ray restarts it and sends it the batch again: it reads the notes again
        assert [driver.unpack(p) for p in await selecting] == expected
        assert not any(w["lost"] for w in remote.to_dict()["per_worker"])
        assert await remote.actors[0].where.remote() != (remote.to_dict()["per_worker"][0]["node"], first)
        ray.kill(remote.actors[1], no_restart=True)  # as a node lost: its batches go to the other
        assert [driver.unpack(p) for p in await remote.select_many(refs, 600, queries)] == expected
        handed: dict[int, object] = {}  # each choice handed over as its batch comes back, none kept
        assert await remote.select_many(refs, 600, queries, lambda i, p: handed.setdefault(i, driver.unpack(p))) == []
        assert [handed[i] for i in range(len(queries))] == expected and len(handed) == len(queries)
        workers = remote.to_dict()["per_worker"]
    assert [w["lost"] for w in workers] == [False, True]
    assert workers[0]["selections"] > len(queries), "the second time, every batch on the one left"


@pytest.mark.parametrize("left", [True, False], ids=["a cluster ray start left", "none"])
def test_a_cluster_that_does_not_answer_is_named_with_what_to_do(monkeypatch, tmp_path, left):
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'r3con[ray]' runs the Ray engine's tests")
    from r3con.engine import _ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # where Ray keeps the address `ray start` last wrote
    if left:
        (tmp_path / "ray").mkdir()
        (tmp_path / "ray" / "ray_current_cluster").write_text("192.0.2.9:6379\n")

    def init(**kwargs):  # what ray.init says after a minute of waiting for a head that is gone
        raise ConnectionError("Failed to connect to Ray cluster at 192.0.2.9:6379")

    monkeypatch.setattr(_ray.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(_ray.ray, "init", init)
    with pytest.raises(r3con.ConfigError) as raised:
        _ray._connect(r3con.Settings.resolve(env={}, base_url="http://127.0.0.1:9/v1", engine="ray"))
    message = str(raised.value)
    assert "\n" not in message and "drop --engine ray" in message
    if left:
        assert "left on this machine at 192.0.2.9:6379" in message and "`ray stop` clears it" in message
    else:
        assert "at a local cluster" in message and "--ray-address" in message


def test_a_workers_parts_are_counted_once_each_and_held_as_8_bytes():
    import random
    import tracemalloc

    from r3con.engine._ray import _Distinct, _part_id

    rng = random.Random(3)  # three calls a part on average, in no order
    calls = [_part_id(rng.randrange(10_000, 20_000), rng.choice([None, 1, 2])) for _ in range(30_000)]
    warm = _Distinct()  # numpy's first np.unique sets up what it keeps for every later one
    warm.add(1)
    warm.count()
    distinct = _Distinct()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for part in calls:
            distinct.add(part)
        count = distinct.count()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert count == len(set(calls)) and distinct.count() == count
    assert held < 16 * count, f"{held:,} B for {count:,} parts"
