"""`r3con run`, `demo` and `fake-llm` as a user runs them: exit codes, one-line errors. Through the entry point in
this process, except where a real process matters (a whole run as installed, a server that runs until stopped,
the standard input of a process)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import cli_in_process, free_port, r3con_cli


def test_run_prints_the_answer_and_a_usage_line(fake_server, corpus, tmp_path):
    proc = r3con_cli("run", "How old are the people named?", str(corpus), "--base-url", fake_server.base_url,
                     "--out", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    assert "usage:" in proc.stderr and "calls" in proc.stderr and "$" in proc.stderr
    assert "relevance: 6/6" in proc.stderr  # plain progress lines (3 documents, 2 rounds) when stderr is not a terminal
    assert "Traceback" not in proc.stderr


def test_run_json_has_the_documented_shape(fake_server, corpus, tmp_path):
    proc = cli_in_process("run", "How old are the people named?", str(corpus), "--json", "--quiet",
                          "--out", str(tmp_path / "runs"), env={"OPENAI_BASE_URL": fake_server.base_url})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) >= {"answer", "run_dir", "documents", "degraded", "usage"}
    assert data["documents"] == 3 and data["degraded"] == []
    assert set(data["usage"]) >= {"calls", "prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "by_stage"}
    assert set(data["usage"]["by_stage"]) == {"relevance", "schema", "populate", "reason"}
    assert set(data) == documented_json_keys(), "docs/usage.md lists every --json key, and only those"


def documented_json_keys() -> set[str]:
    """The keys of the `--json` table in docs/usage.md (its first column)."""
    text = (Path(__file__).parents[2] / "docs" / "usage.md").read_text()
    table = text[text.index("| key | what |"):].split("\n\n")[0]
    return {line.split("`")[1] for line in table.splitlines()[2:]}


@pytest.mark.parametrize("args, env, code, message", [
    (["run", "q", "/no/such/folder", "--base-url", "http://127.0.0.1:9/v1"], {}, 2, "no such file or folder"),
    (["run", "q", "{corpus}"], {}, 2, "set OPENAI_BASE_URL"),
    (["run", "q", "{corpus}", "--base-url", "http://127.0.0.1:{port}/v1"], {}, 2, "no OpenAI-compatible server answers"),
    (["run", "q", "{corpus}", "--base-url", "http://x/v1", "--rounds", "-1"], {}, 2, "--rounds must be 0 or more"),
    (["run", "q", "{corpus}"], {"R3CON_BASE_URL": "http://x/v1", "R3CON_CONCURRENCY": "many"}, 2, "R3CON_CONCURRENCY"),
    (["run", "q", "{corpus}", "--base-url", "http://x/v1", "--stage-model", "oops"], {}, 2, "STAGE=MODEL"),
    (["run"], {}, 2, "Missing argument"),
])
def test_bad_usage_and_input_exit_2_with_one_line(args, env, code, message, corpus, tmp_path):
    args = [a.format(corpus=corpus, port=free_port()) for a in args] + ["--out", str(tmp_path)] * (len(args) > 1)
    proc = cli_in_process(*args, env=env)
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    if args[1:]:
        assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1


def test_empty_folder_is_bad_input(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = cli_in_process("run", "q", str(tmp_path / "empty"), "--base-url", "http://x/v1")
    assert proc.returncode == 2 and "no readable document" in proc.stderr


def test_failed_run_exits_1_and_keeps_its_folder(corpus, tmp_path):
    # a server that lists a model but answers every completion with HTTP 500
    from r3con.testing import FakeLLMServer, FaultPlan

    with FakeLLMServer(port=0, faults=FaultPlan.parse("500=1.0,max=1000")) as server:
        proc = cli_in_process("run", "q", str(corpus), "--base-url", server.base_url, "--out", str(tmp_path / "runs"),
                              env={"R3CON_RETRY_BASE_S": "0.001"})  # every call is retried: quickly
    assert proc.returncode == 1, proc.stderr
    assert "failed" in proc.stderr and "Traceback" not in proc.stderr
    (folder,) = (tmp_path / "runs").iterdir()
    assert (folder / "error.json").is_file() and (folder / "manifest.json").is_file()


def test_demo_runs_offline_and_says_the_model_is_scripted(tmp_path):
    proc = cli_in_process("demo", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "scripted offline model" in proc.stderr
    assert "Answer (scripted model):" in proc.stdout and "Run folder:\n  " in proc.stdout
    assert any(tmp_path.iterdir())


def test_fake_llm_prints_its_port_first():
    proc = subprocess.Popen([sys.executable, "-m", "r3con", "fake-llm", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT=") and int(line.strip().split("=")[1]) > 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


def test_version_prints_the_version():
    import r3con

    proc = cli_in_process("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"r3con {r3con.__version__}"


@pytest.mark.parametrize("how", ["stdin", "@file", "--question-file"])
def test_the_question_comes_from_stdin_or_a_file(how, fake_server, corpus, tmp_path):
    question = "How old are the people named?"
    (tmp_path / "question.txt").write_text(question + "\n")
    args = {"stdin": ["-"], "@file": [f"@{tmp_path / 'question.txt'}"],
            "--question-file": ["--question-file", str(tmp_path / "question.txt")]}[how]
    proc = cli_in_process("run", *args, str(corpus), "--base-url", fake_server.base_url, "--out", str(tmp_path / "runs"),
                          "--json", "-q", stdin=question if how == "stdin" else "")
    assert proc.returncode == 0, proc.stderr
    (folder,) = (tmp_path / "runs").iterdir()
    assert json.loads((folder / "manifest.json").read_text())["task"] == question


@pytest.mark.parametrize("args, message", [
    (["@/no/such/question.txt"], "cannot read the question from /no/such/question.txt"),
    (["-"], "the question from standard input is empty"),
])
def test_an_unreadable_question_exits_2_with_one_line(args, message, corpus, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "r3con", "run", *args, str(corpus), "--base-url", "http://x/v1",
                           "--out", str(tmp_path / "runs")], input="", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert message in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", [["run"], ["estimate"], ["eval", "run"], ["eval", "report"], ["fake-llm"], []])
def test_help_names_values_in_words_not_python_types(command):
    proc = cli_in_process(*command, "--help", env={"COLUMNS": "100"})
    assert proc.returncode == 0, proc.stderr
    for python_type in ("<bool>", "<str>", "<int>", "<float>", "<path>", "list[str]"):
        assert python_type not in proc.stdout, python_type
    if command == ["run"]:
        assert "--max-cost" in proc.stdout and "NUMBER" in proc.stdout and "--log-calls" in proc.stdout


def test_the_closing_lines_fit_80_columns_with_the_folder_and_report_on_lines_of_their_own(fake_server, corpus,
                                                                                           tmp_path):
    out = tmp_path / "a-folder-with-a-rather-long-name-for-the-runs-of-this-test"
    proc = cli_in_process("run", "How old are the people named?", str(corpus), "--base-url", fake_server.base_url,
                          "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    run_dir = json.loads(proc.stdout)["run_dir"]
    closing = [line for line in proc.stderr.splitlines() if not line.startswith("[")]  # not the progress lines
    assert closing[-4:] == ["run folder:", f"  {run_dir}", "report:", f"  {run_dir}/report.html"]
    assert len(run_dir) > 80  # the paths stay whole even when longer than a line
    assert all(len(line) <= 80 for line in closing[:-4]), closing
    assert any(line.startswith("usage: ") for line in closing) and any(line.startswith("  ") for line in closing[:-4])
