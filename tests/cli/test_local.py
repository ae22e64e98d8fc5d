"""With no endpoint configured, `r3con run` finds the local server and says so in one line; `r3con servers`
lists what it finds; an unserved model and a missing extra fail before any work. Free ports only."""

from __future__ import annotations

import json
import sys

from r3con.testing import LMStudioServer, OllamaServer

from ..conftest import cli_in_process, free_port


def test_run_finds_ollama_uses_its_loaded_model_and_says_how_to_raise_its_window(corpus, tmp_path):
    with OllamaServer(models=("llama3.2:latest", "qwen3:8b"), running={"llama3.2:latest": 8192}) as server:
        proc = cli_in_process("run", "How old are the people named?", str(corpus), "--out", str(tmp_path / "runs"),
                              env={"R3CON_LOCAL_PORTS": f"{free_port()}=vLLM,{server.port}=Ollama"})
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stderr.replace("\n  ", " ").splitlines() if x.startswith("r3con: using"))
    assert f"using Ollama at {server.base_url}, model llama3.2:latest (window 8,192 tokens" in line
    assert "OLLAMA_CONTEXT_LENGTH" in line
    (manifest,) = (tmp_path / "runs").glob("*/manifest.json")
    endpoint = json.loads(manifest.read_text())
    assert server.base_url in json.dumps(endpoint) and "Ollama /api/ps context_length" in json.dumps(endpoint)


def test_nothing_found_says_so_and_how_to_point_r3con_at_a_server(corpus, tmp_path):
    port = free_port()
    proc = cli_in_process("run", "q", str(corpus), "--out", str(tmp_path / "runs"),
                          env={"R3CON_LOCAL_PORTS": f"{port}=Ollama"})
    assert proc.returncode == 2
    assert f"no local server answers on ports {port} (Ollama)" in proc.stderr
    assert "--base-url" in proc.stderr and "OPENAI_BASE_URL" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_several_models_none_loaded_lists_them_and_asks_for_model(corpus, tmp_path):
    with LMStudioServer(models={"qwen2.5-7b-instruct": 32768, "gemma-3-4b": 131072}) as server:
        proc = cli_in_process("run", "q", str(corpus), "--out", str(tmp_path / "runs"),
                              env={"R3CON_LOCAL_PORTS": str(server.port)})
    assert proc.returncode == 2
    assert "LM Studio" in proc.stderr and "qwen2.5-7b-instruct, gemma-3-4b" in proc.stderr and "--model" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_two_servers_found_ask_which_one(corpus, tmp_path):
    with OllamaServer() as a, LMStudioServer() as b:
        proc = cli_in_process("run", "q", str(corpus), "--out", str(tmp_path / "runs"),
                              env={"R3CON_LOCAL_PORTS": f"{a.port},{b.port}"})
    assert proc.returncode == 2
    assert "2 local servers answer" in proc.stderr and a.base_url in proc.stderr and b.base_url in proc.stderr


def test_an_unserved_model_fails_before_a_run_folder_is_made(corpus, tmp_path):
    with OllamaServer(models=("llama3.2:latest", "qwen3:8b")) as server:
        proc = cli_in_process("run", "q", str(corpus), "--base-url", server.base_url, "--model", "mistral",
                              "--out", str(tmp_path / "runs"))
    assert proc.returncode == 2
    assert "does not serve the model mistral; it serves llama3.2:latest, qwen3:8b" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_servers_lists_each_server_with_its_models_windows():
    with OllamaServer(models=("llama3.2:latest",), running={"llama3.2:latest": 8192}) as ollama, \
            LMStudioServer(models={"m": 32768}, loaded={"m": 4096}) as lms:
        env = {"R3CON_LOCAL_PORTS": f"{ollama.port}=Ollama,{free_port()}=vLLM,{lms.port}=LM Studio"}
        table = cli_in_process("servers", env=env)
        rows = json.loads(cli_in_process("servers", "--json", env=env).stdout)
    assert table.returncode == 0, table.stderr
    assert f"Ollama at {ollama.base_url}" in table.stdout and "llama3.2:latest: 8,192 tokens" in table.stdout
    assert "OLLAMA_CONTEXT_LENGTH" in table.stdout  # how to raise it
    assert f"LM Studio at {lms.base_url}" in table.stdout and "m: 4,096 tokens" in table.stdout
    assert [(r["server"], r["model"], r["window"], r["loaded"]) for r in rows] == [
        ("Ollama", "llama3.2:latest", 8192, True), ("LM Studio", "m", 4096, True)]


def test_servers_says_when_none_answers():
    proc = cli_in_process("servers", env={"R3CON_LOCAL_PORTS": str(free_port())})
    assert proc.returncode == 1 and "no local server answers" in proc.stderr


def test_eval_hipporag_without_the_graph_extra_fails_before_any_call(fake_server, tmp_path, monkeypatch,
                                                                     benchmark_root):
    monkeypatch.setitem(sys.modules, "igraph", None)  # as if r3con[graph] were not installed
    proc = cli_in_process("eval", "run", "--benchmark", "loong", "--method", "hipporag", "--limit", "1", "--data",
                          str(benchmark_root / "loong"), "--out", str(tmp_path / "ev"), "--base-url",
                          fake_server.base_url)
    assert proc.returncode == 2
    assert "r3con[graph]" in proc.stderr
    assert fake_server.calls() == []


def test_prompts_near_a_window_the_server_did_not_report_end_the_run_with_a_warning(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Ledger\n\n" + " ".join(
        f"Supplier {i} delivered {i * 3} crates to Rotterdam on day {i}." for i in range(300)))
    with OllamaServer(models=("m:latest",)) as server:  # not loaded: Ollama's default window, not asked
        # parts planned from the window stay well inside it; a part size the user set need not
        proc = cli_in_process("run", "Which suppliers delivered to Rotterdam?", str(docs), "--out",
                              str(tmp_path / "runs"), "--json", "--part-tokens", "3900",
                              env={"R3CON_LOCAL_PORTS": str(server.port)})
    assert proc.returncode == 0, proc.stderr
    near = json.loads(proc.stdout)["usage"]["events"].get("near_window", 0)
    warnings = [w for w in proc.stderr.replace("\n  ", " ").splitlines() if w.startswith("warning: ")]
    assert near > 0 and any(f"{near} prompt(s) reached 90% or more of the 4,096-token window" in w
                            and "--context-window" in w for w in warnings), proc.stderr
