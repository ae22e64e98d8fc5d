"""`r3con eval` commands, in process (typer's runner); the end-to-end run over HTTP is at the bottom."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from r3con.cli.eval_cmd import eval_app
from r3con.llm.types import Usage
from r3con.results import MethodOutcome
from r3con.testing import FakeLLMServer

from ._fakes import TINY_CORPUSQA, shared_data

runner = CliRunner()


@pytest.fixture
def no_llm_env(monkeypatch):
    for name in ("R3CON_BASE_URL", "OPENAI_BASE_URL", "R3CON_MODEL", "R3CON_DATA"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def silent_method(monkeypatch):
    """A registered method that answers nothing: every answer is empty, so no judge (or endpoint) is needed."""
    import r3con.methods as methods

    calls = []

    async def silent(task, documents, settings, run_dir):
        calls.append(task)
        return MethodOutcome(answer="", usage=Usage(calls=1, cost_usd=0.5), by_stage={}, capped=False, degraded=(),
                           run_dir=run_dir)

    monkeypatch.setitem(methods._METHODS, "silent", silent)
    return calls


def test_run_then_report_without_any_endpoint(tmp_path, silent_method, no_llm_env):
    out = tmp_path / "eval"
    args = ["run", "--benchmark", "corpusqa", "--data", str(TINY_CORPUSQA), "--method", "silent", "--out", str(out),
            "--no-plots"]
    result = runner.invoke(eval_app, args)
    assert result.exit_code == 0, result.output
    assert "70.64" in result.stdout  # the paper's number beside the run's
    assert len(silent_method) == 3
    assert (out / "silent" / "financial_en_0001.json").is_file() and (out / "report" / "report.md").is_file()
    # again, as JSON: nothing runs twice
    result = runner.invoke(eval_app, [*args, "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ran"] == 0 and data["methods"]["silent"]["n"] == 3 and data["methods"]["silent"]["accuracy"] == 0
    assert data["methods"]["silent"]["outcomes"] == {"empty": 3}
    assert len(silent_method) == 3
    result = runner.invoke(eval_app, ["report", str(out), "--out", str(tmp_path / "rep"), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "## CorpusQA" in result.stdout and "| run | silent |" in result.stdout and "70.64" in result.stdout
    assert (tmp_path / "rep" / "summary.csv").is_file()
    result = runner.invoke(eval_app, ["report", str(out), "--out", str(tmp_path / "rep"), "--no-plots", "--json"])
    assert json.loads(result.stdout)["benchmarks"]["corpusqa"]["runs"][0]["method"] == "silent"


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["run", "--benchmark", "loong", "--data", "/nonexistent/loong"], "no loong data at /nonexistent/loong", 2),
        (["run", "--benchmark", "corpusqa", "--data", str(TINY_CORPUSQA), "--sets", "2"], "--sets does not apply", 2),
        (["run", "--benchmark", "corpusqa", "--data", str(TINY_CORPUSQA), "--levels", "x"], "--levels takes numbers", 2),
        (["run", "--benchmark", "corpusqa", "--data", str(TINY_CORPUSQA), "--tasks", "nope"], "no corpusqa task matches", 2),
        (["run", "--benchmark", "corpusqa", "--data", str(TINY_CORPUSQA), "--method", "nope"], "unknown method 'nope'", 2),
        (["run", "--benchmark", "corpusqa", "--data", str(TINY_CORPUSQA), "--judge-prompt", "/no/such.j2"],
         "cannot read the judge prompt", 2),
        (["download", "--benchmark", "corpusqa", "--to", "x"], "huggingface.co", 2),
        (["report", "/nonexistent/eval"], "holds no evaluation", 2),
    ],
)
def test_errors_are_one_line_with_the_fix(args, message, code, tmp_path, no_llm_env, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(eval_app, args)
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert "Traceback" not in result.output


def test_legal_only_is_refused_clearly(no_llm_env):
    data = shared_data("loong")
    result = runner.invoke(eval_app, ["run", "--benchmark", "loong", "--data", str(data), "--domains", "legal"])
    assert result.exit_code == 2 and "legal domain's documents" in result.stderr


def test_end_to_end_over_the_scripted_server(tmp_path, no_llm_env):
    """The whole harness over HTTP: R3CON runs every task, the scripted server's judge rates each answer."""
    out = tmp_path / "eval"
    with FakeLLMServer(port=0) as server:
        result = runner.invoke(eval_app, [
            "run", "--benchmark", "corpusqa", "--data", str(TINY_CORPUSQA), "--out", str(out),
            "--base-url", server.base_url, "--json", "--quiet",
        ])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    summary = data["methods"]["r3con"]
    assert summary["n"] == 3 and data["ran"] == 3
    assert summary["outcomes"].get("judge_failed", 0) == 0 and summary["outcomes"].get("judge_error", 0) == 0
    judge_calls = [json.loads(line) for line in (out / "judge-calls.jsonl").read_text().splitlines()]
    assert judge_calls and all(c["stage"] == "judge" for c in judge_calls)
    assert Path(out / "report" / "corpusqa_pareto.png").is_file()


def test_eval_run_without_matplotlib_writes_the_tables_and_says_how_to_get_plots(
        tmp_path, silent_method, no_llm_env, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails, as without the extra
    out = tmp_path / "eval"
    result = runner.invoke(eval_app, ["run", "--benchmark", "corpusqa", "--data", str(TINY_CORPUSQA),
                                      "--method", "silent", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert len(silent_method) == 3 and (out / "silent" / "financial_en_0001.json").is_file(), "nothing done is lost"
    assert {p.name for p in (out / "report").iterdir()} == {"report.md", "summary.csv", "categories.csv", "report.json",
                                                            "summary.parquet", "categories.parquet", "tasks.parquet"}
    hints = [line for line in result.stderr.splitlines() if "plots skipped" in line]
    assert len(hints) == 1 and "pip install 'r3con[eval]'" in hints[0]
    # `eval report` over the same folder writes to the same place by default, and does not fail either
    (out / "report" / "report.md").unlink()
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(eval_app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "report" / "report.md").is_file() and not (tmp_path / "r3con-report").exists()
    assert "plots skipped" in result.stderr


def test_the_papers_judge_on_its_own_endpoint_judges_and_the_report_says_whose_setting_it_is(tmp_path, no_llm_env,
                                                                                             monkeypatch):
    """A judge key set: the paper's judge (gpt-5.4-mini) on its own endpoint judges, the method's endpoint
    does not, and `eval run` says which of the paper's tasks it ran."""
    for name in ("OPENAI_API_KEY", "R3CON_JUDGE_API_KEY", "R3CON_JUDGE_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "eval"
    ids = "65ce3238-2780-47eb-826a-efda653bd5b4,153aaca4-bab8-4bf8-b0b6-795e1969187f"
    with FakeLLMServer(port=0, model="qwen") as method_server, FakeLLMServer(port=0, model="gpt-5.4-mini") as judge:
        monkeypatch.setenv("R3CON_JUDGE_API_KEY", "judge-key")
        result = runner.invoke(eval_app, [
            "run", "--benchmark", "loong", "--data", str(shared_data("loong")), "--tasks", ids, "--method",
            "longcontext", "--out", str(out), "--base-url", method_server.base_url, "--judge-base-url",
            judge.base_url, "--no-plots"])
        assert result.exit_code == 0, result.output
        assert {c["stage"] for c in judge.calls()} == {"judge"} and len(judge.calls()) == 2
        assert "judge" not in {c["stage"] for c in method_server.calls()}
    assert "loong: 2 of the paper's 1,277 tasks (sets 2-4, legal included) are selected by the filters" in result.output
    report = (out / "report" / "report.md").read_text()
    assert "Judge: gpt-5.4-mini (official protocol, prompt loong_official)" in report
    assert "Not the paper's setting" not in report
    manifest = json.loads((out / "eval.json").read_text())
    assert manifest["judge"]["model"] == "gpt-5.4-mini" and manifest["judge"]["protocol"] == "official"


def test_the_papers_judge_without_a_key_is_a_one_line_error(tmp_path, no_llm_env, monkeypatch):
    for name in ("R3CON_JUDGE_API_KEY", "R3CON_JUDGE_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    result = runner.invoke(eval_app, ["run", "--benchmark", "corpusqa", "--data", str(TINY_CORPUSQA), "--judge",
                                      "paper", "--out", str(tmp_path / "e")])
    assert result.exit_code != 0
    assert result.output.strip().splitlines()[-1].startswith("error: the paper judge (gpt-5.4-mini) needs")
