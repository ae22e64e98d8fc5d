"""`r3con eval run` end to end on real slices of Loong and Dracula, over HTTP against the scripted server.

The scripted server answers generically (notes from the documents' sentences, records from the schema,
judge verdicts from token overlap), so these tests check the harness, not the answers' quality: every task
is run, answered and judged with structured output, the report carries the paper's numbers, and a second
run pays for nothing.
"""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from r3con.cli.eval_cmd import eval_app
from r3con.testing import FakeLLMServer

from ._fakes import shared_data

runner = CliRunner()

# The two smallest set-2 tasks of the paper's Loong slice: a Chinese financial one and an English paper one.
LOONG_SLICE = ("65ce3238-2780-47eb-826a-efda653bd5b4", "153aaca4-bab8-4bf8-b0b6-795e1969187f")


@pytest.fixture
def no_llm_env(monkeypatch):
    for name in ("R3CON_BASE_URL", "OPENAI_BASE_URL", "R3CON_MODEL", "R3CON_DATA"):
        monkeypatch.delenv(name, raising=False)


def _eval(server: FakeLLMServer, *args: str) -> dict:
    result = runner.invoke(eval_app, ["run", *args, "--base-url", server.base_url, "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("benchmark", "extra", "n", "paper_number"),
    [
        ("loong", ["--tasks", ",".join(LOONG_SLICE)], 2, "37.43"),
        ("dracula", [], 1, None),
    ],
)
def test_a_real_slice_runs_is_judged_reported_and_resumes_for_free(tmp_path, no_llm_env, benchmark, extra, n,
                                                                    paper_number):
    data = shared_data(benchmark)
    out = tmp_path / "eval"
    args = ["--benchmark", benchmark, "--data", str(data), "--out", str(out), *extra]
    with FakeLLMServer(port=0) as server:
        summary = _eval(server, *args)
        first_calls = len(server.calls())
        again = _eval(server, *args)
        assert len(server.calls()) == first_calls, "a finished evaluation must not call the endpoint again"

    method = summary["methods"]["r3con"]
    assert summary["ran"] == n and method["n"] == n
    assert method["outcomes"].get("failed", 0) == 0 and method["outcomes"].get("judge_failed", 0) == 0
    assert again["ran"] == 0 and again["methods"]["r3con"]["n"] == n

    records = sorted((out / "r3con").glob("*.json"))
    assert len(records) == n
    for path in records:
        record = json.loads(path.read_text())
        run_dir = out / record["run_dir"]  # relative to the evaluation folder
        assert record["answer"].strip() == (run_dir / "answer.txt").read_text().strip(), "the run's own answer"
        last = sorted((run_dir / "notes").glob("round-*.json"))[-1]
        assert any(n["note"] for n in json.loads(last.read_text())), "the answer rests on notes the run wrote"
        assert record["verdict"] is not None
        assert record["model"] == "r3con-scripted", "the model the endpoint served, though none was configured"
    judge_calls = [json.loads(line) for line in (out / "judge-calls.jsonl").read_text().splitlines()]
    # Dracula is judged against its strict and its lenient gold separately
    assert len(judge_calls) == (2 * n if benchmark == "dracula" else n)
    assert all(c["stage"] == "judge" for c in judge_calls)

    stages = {c["stage"] for c in server.calls()}
    assert {"relevance", "schema", "populate", "judge"} <= stages
    report = (out / "report" / "report.md").read_text()
    assert "| run | r3con |" in report and "r3con-scripted" in report and "(endpoint default)" not in report
    if paper_number:
        assert paper_number in report
    assert Path(out / "report" / f"{benchmark}_pareto.png").is_file()
