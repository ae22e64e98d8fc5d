"""A run killed with SIGKILL and started again repeats no call that had succeeded (checked on the server's log)."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from r3con.config import Settings
from r3con.errors import ConfigError, InputError
from r3con.runs._resume import ResumePlan, check_settings, read_resume
from r3con.testing import FakeLLMServer, FaultPlan

from .conftest import cli_in_process

QUESTION = "Which people are named, and how old is each?"
PEOPLE = ["Ann Lee", "Bob Stone", "Cara Diaz", "Dan Moss", "Eve Hart", "Finn Cole", "Gus Park", "Hana Ito"]
CONCURRENCY = 2

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, name in enumerate(PEOPLE):
        (folder / f"{i:02d}.txt").write_text(f"Record {i}\n\n{name} is {30 + i} years old and works in Oslo.")
    return folder


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}


def _args(server, corpus, tmp_path, cache="llm.sqlite"):
    return ["run", QUESTION, str(corpus), "--base-url", server.base_url, "--out", str(tmp_path / "runs"),
            "--cache", str(tmp_path / cache), "--concurrency", str(CONCURRENCY), "--json", "--quiet"]


def _kill_when(server, args, stage: str, done: int) -> list[dict]:
    """Start `r3con run`, SIGKILL it once the server answered `done` calls of `stage`; the log up to then."""
    proc = subprocess.Popen([sys.executable, "-m", "r3con", *args], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while sum(1 for c in server.calls() if c["stage"] == stage and c["status"] == 200) < done:
            if proc.poll() is not None:
                raise AssertionError(f"the run ended before it could be killed: {proc.stderr.read()}")
            if time.monotonic() > deadline:
                raise AssertionError("the run made no progress")
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        log = server.calls()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    return log


def _assert_no_successful_call_repeated(before: list[dict], after: list[dict]) -> None:
    ok = [c["request_hash"] for c in before if c["status"] == 200]
    repeated = {c["request_hash"] for c in after} & set(ok)
    # only calls in flight when the process died may be asked again: at most one per concurrent slot
    assert len(repeated) <= CONCURRENCY, repeated
    assert repeated <= set(ok[-2 * CONCURRENCY:]), repeated


def test_killed_mid_relevance_then_rerun_repeats_no_successful_call(corpus, tmp_path):
    with FakeLLMServer(faults=FaultPlan(delay_s=0.05)) as server:
        args = _args(server, corpus, tmp_path)
        before = _kill_when(server, args, "relevance", 5)
        assert {c["stage"] for c in before} == {"relevance"}  # killed mid-relevance: nothing later had started
        proc = cli_in_process(*args)
        assert proc.returncode == 0, proc.stderr
        after = server.calls()[len(before):]
    _assert_no_successful_call_repeated(before, after)
    result = json.loads(proc.stdout)
    assert result["usage"]["cache_hits"] >= 5 - CONCURRENCY and result["degraded"] == []
    assert {c["stage"] for c in after} >= {"relevance", "schema", "populate", "reason"}


def test_killed_mid_population_then_resumed_repeats_no_successful_call_and_answers_the_same(corpus, tmp_path):
    with FakeLLMServer() as server:  # the reference: one uninterrupted run, with a cache of its own
        clean = cli_in_process(*_args(server, corpus, tmp_path, cache="other.sqlite"))
        assert clean.returncode == 0, clean.stderr
    clean_dir = json.loads(clean.stdout)["run_dir"]
    with FakeLLMServer(faults=FaultPlan(delay_s=0.05)) as server:
        before = _kill_when(server, _args(server, corpus, tmp_path), "populate", 3)
        assert {"relevance", "schema", "populate"} <= {c["stage"] for c in before}
        assert "reason" not in {c["stage"] for c in before}
        (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if str(p) != clean_dir]
        proc = cli_in_process("run", "--resume", str(run_dir), "--base-url", server.base_url, "--json", "--quiet")
        assert proc.returncode == 0, proc.stderr
        after = server.calls()[len(before):]
    _assert_no_successful_call_repeated(before, after)
    assert {c["stage"] for c in after} <= {"populate", "reason"}  # relevance and schema came from the cache
    resumed = json.loads(proc.stdout)
    assert resumed["run_dir"] == str(run_dir) and (run_dir / "answer.txt").is_file()
    assert resumed["answer"] == json.loads(clean.stdout)["answer"]
    assert (run_dir / "records.json").read_text() == (tmp_path / clean_dir / "records.json").read_text()


def test_resume_needs_a_run_folder(tmp_path):
    with pytest.raises(InputError, match="no readable manifest.json"):
        read_resume(tmp_path)
    proc = cli_in_process("run", "--resume", str(tmp_path), "--base-url", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and "no readable manifest.json" in proc.stderr


def test_resume_reads_the_task_sources_and_settings(tmp_path):
    manifest = {"task": "q?", "documents": [{"source": "/d/a.txt"}, {"source": "/d/b.txt"}],
                "settings": {"rounds": 3, "api_key": "***", "cache_path": "/c/llm.sqlite", "model": None,
                             "stage_models": {"reason": "big"}, "not_a_setting": 1}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    plan = read_resume(tmp_path)
    assert plan.task == "q?" and plan.sources == ("/d/a.txt", "/d/b.txt")
    assert dict(plan.settings) == {"rounds": 3, "cache_path": "/c/llm.sqlite", "stage_models": {"reason": "big"}}
    manifest["documents"] = [{"source": "<memory:1>"}]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="in memory"):
        read_resume(tmp_path)


def _folder_bytes(folder):
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def finished(corpus, tmp_path):
    """A finished run, its folder, and the scripted server it ran against (still running)."""
    with FakeLLMServer() as server:
        proc = cli_in_process(*_args(server, corpus, tmp_path))
        assert proc.returncode == 0, proc.stderr
        yield server, Path(json.loads(proc.stdout)["run_dir"])


def _changed_corpus(corpus, how):
    if how == "a new document":
        (corpus / "99.txt").write_text("Record 99\n\nIvy Ash is 51 years old.")
    elif how == "a removed document":
        (corpus / "00.txt").unlink()
    else:
        (corpus / "03.txt").write_text("Record 3\n\nDan Moss is 99 years old and works in Rome.")


@pytest.mark.parametrize("how, message", [
    ("another question", "continues the question"),
    ("a new document", "the documents differ"),
    ("a removed document", "is gone"),
    ("an edited document", "changed since its run"),
    ("another setting", "rounds"),
])
def test_a_resume_that_would_compute_another_run_is_refused_and_the_run_is_untouched(finished, corpus, how, message):
    server, folder = finished
    before, calls = _folder_bytes(folder), len(server.calls())
    args = ["run", "--resume", str(folder), "--base-url", server.base_url, "--quiet"]
    if how == "another question":
        args[1:1] = ["How many people work in Oslo?", str(corpus)]
    elif how == "another setting":
        args += ["--rounds", "3"]
    else:
        _changed_corpus(corpus, how)
        if how == "a new document":  # the same folder given again now holds one more file
            args[1:1] = [QUESTION, str(corpus)]
    proc = cli_in_process(*args)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert message in line and "start a new run" in line and str(folder) in line
    assert _folder_bytes(folder) == before, "the earlier run's artifacts are byte-identical"
    assert len(server.calls()) == calls


def test_a_resume_with_the_same_question_and_paths_given_again_continues(finished, corpus):
    server, folder = finished
    proc = cli_in_process("run", QUESTION, str(corpus), "--resume", str(folder), "--base-url", server.base_url,
                     "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["usage"]["calls"] == 0, "everything came from the cache"


@pytest.mark.parametrize("case", ["unreachable endpoint", "unpriced model", "missing document", "bad setting"])
def test_a_failed_start_leaves_no_run_folder(corpus, tmp_path, case, monkeypatch):
    from .conftest import free_port

    runs = tmp_path / "runs"
    base = f"http://127.0.0.1:{free_port()}/v1"
    args = ["run", QUESTION, str(corpus), "--out", str(runs), "--quiet"]
    with FakeLLMServer() as server:
        if case == "unreachable endpoint":
            args += ["--base-url", base]
        elif case == "unpriced model":  # on a provider's endpoint (a local server's model is free)
            from r3con.llm import pricing

            monkeypatch.setattr(pricing, "is_local_url", lambda url: False)
            args += ["--base-url", server.base_url, "--max-cost", "1"]
        elif case == "missing document":
            args = ["run", QUESTION, str(corpus / "nope.txt"), "--out", str(runs), "--base-url", server.base_url]
        else:
            args += ["--base-url", server.base_url, "--layout", "sideways"]
        proc = cli_in_process(*args)
        assert not [c for c in server.calls() if str(c.get("path", "")).endswith("/chat/completions")]
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not runs.exists() or list(runs.iterdir()) == [], "no empty run folder"


def test_a_resume_may_change_the_operational_settings_and_no_other():
    saved = Settings.resolve(env={})
    plan = ResumePlan(run_dir=Path("run"), task="q", sources=(), settings=saved.public())
    for f in dataclasses.fields(Settings):
        value = getattr(saved, f.name)
        other = {bool: lambda v: not v, int: lambda v: v + 1, float: lambda v: v * 2}.get(type(value))
        if other is None or f.name not in plan.settings:
            continue
        if f.metadata["role"] == "operational":
            check_settings(plan, {f.name: other(value)})
        else:
            with pytest.raises(ConfigError, match=f"ran with {f.name}="):
                check_settings(plan, {f.name: other(value)})
