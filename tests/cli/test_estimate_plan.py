"""`r3con estimate` plans the run `r3con run` would make: the same local server found, its window and slots, the
same parts; it says which server and window it planned for."""

import json
from pathlib import Path

from r3con.testing import FakeLLMServer

from ..conftest import cli_in_process

QUESTION = "Who wrote to whom, and from where?"


def long_corpus(folder: Path) -> Path:
    folder.mkdir()
    for i in range(3):
        lines = [f"Letter {i}.{j}: Ann Lee wrote to Bob Stone from Oslo on day {j} about the harbour." for j in range(400)]
        (folder / f"letters-{i}.txt").write_text("\n".join(lines))
    return folder


def test_estimate_without_base_url_plans_for_the_local_server_run_would_use(tmp_path):
    corpus = long_corpus(tmp_path / "docs")
    with FakeLLMServer(max_model_len=8192) as server:
        env = {"R3CON_LOCAL_PORTS": str(server.port)}  # the server found as on a usual port
        estimate = cli_in_process("estimate", QUESTION, str(corpus), "--json", env=env)
        run = cli_in_process("run", QUESTION, str(corpus), "--json", "--no-cache", "--out", str(tmp_path / "runs"),
                             env=env)
    assert estimate.returncode == 0, estimate.stderr
    assert run.returncode == 0, run.stderr
    planned, ran = json.loads(estimate.stdout), json.loads(run.stdout)
    assert planned["endpoint"]["base_url"] == server.base_url and planned["endpoint"]["context_window"] == 8192
    assert planned["model"] == "r3con-scripted", "the model the server serves, not 'unknown'"
    assert f"planned for {server.base_url}" in estimate.stderr and "8,192 tokens" in estimate.stderr
    manifest = json.loads((Path(ran["run_dir"]) / "manifest.json").read_text())
    assert planned["parts"] == sum(d["parts"] for d in manifest["documents"]) > 3, "the same parts as the run"
    relevance = next(s for s in planned["stages"] if s["stage"] == "relevance")
    assert abs(relevance["calls"] - ran["usage"]["by_stage"]["relevance"]["calls"]) <= 0.15 * relevance["calls"]
    assert abs(planned["total"]["calls"] - ran["usage"]["calls"]) <= 0.15 * ran["usage"]["calls"]


def test_estimate_with_no_server_says_it_assumed_the_window(tmp_path):
    corpus = long_corpus(tmp_path / "docs")
    proc = cli_in_process("estimate", QUESTION, str(corpus), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["endpoint"] is None
    assert "planned for no endpoint" in proc.stderr and "32,768 tokens (assumed)" in proc.stderr


def test_the_run_banner_names_its_parts_window_and_calls_in_flight(tmp_path):
    corpus = long_corpus(tmp_path / "docs")
    with FakeLLMServer(max_model_len=8192) as server:
        proc = cli_in_process("run", QUESTION, str(corpus), "--base-url", server.base_url, "--concurrency", "3",
                              "--out", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    assert "plan: " in proc.stderr and "for a window of 8,192; 3 calls in flight (config)" in proc.stderr
    assert "(ETA " in proc.stderr, "a stage's progress lines say when it should end"
