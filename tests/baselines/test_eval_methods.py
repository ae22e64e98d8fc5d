"""Every method through `r3con eval run` on the same task, model and endpoint, then side by side in `r3con eval report`."""

import csv
import json

import pytest
from typer.testing import CliRunner

from r3con.cli.eval_cmd import eval_app
from r3con.methods import available_methods, describe_methods
from r3con.testing import FakeLLMServer

from ..eval._fakes import shared_data

runner = CliRunner()
BASELINES = {"longcontext", "codeagent", "rlm", "structrag", "rag", "memagent", "readagent", "raptor", "hipporag",
             "linearrag", "arag", "fileagent"}
ABLATIONS = {"r3con", "r3con-rounds0", "r3con-rounds1", "r3con-rounds3", "r3con-nostruct", "r3con-direct"}


def test_every_method_is_registered_and_described():
    assert set(available_methods()) >= BASELINES | ABLATIONS
    described = describe_methods()
    assert all(described[name] for name in BASELINES | ABLATIONS)
    result = runner.invoke(eval_app, ["methods", "--json"])
    assert result.exit_code == 0 and set(json.loads(result.stdout)) == set(available_methods())


@pytest.fixture
def loong():
    return shared_data("loong")  # before clean_env clears R3CON_DATA


def test_all_methods_side_by_side_with_cost(loong, tmp_path, clean_env, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the call cache stays in this test
    data = loong
    common = ["--benchmark", "loong", "--data", str(data), "--sets", "1", "--languages", "zh", "--limit", "1",
              "--model", "gpt-4o-mini", "--json", "--quiet", "--no-plots"]
    with FakeLLMServer(model="gpt-4o-mini") as server:  # a model with a known price, so cost is not zero
        first = runner.invoke(eval_app, ["run", *common, "--method", "all", "--out", str(tmp_path / "a"),
                                         "--base-url", server.base_url, "--embedding-model", "hash-embed"])
        assert first.exit_code == 0, first.output
        second = runner.invoke(eval_app, ["run", *common, "--method", "rag,longcontext", "-m", "raptor",
                                          "--out", str(tmp_path / "b"), "--base-url", server.base_url])
        assert second.exit_code == 0, second.output
        stages = {c["stage"] for c in server.calls()}
    data_a = json.loads(first.stdout)
    assert set(data_a["methods"]) == set(available_methods()) and data_a["ran"] == len(available_methods())
    for name, summary in data_a["methods"].items():
        assert summary["n"] == 1 and summary["outcomes"].get("failed", 0) == 0, (name, summary)
        usage = summary["usage"]
        # the ablations share some calls with r3con, which the call cache may serve (counted as saved)
        assert usage["calls"] + usage.get("cache_hits", 0) > 0, name
        assert usage["cost_usd"] + usage.get("saved_usd", 0) > 0, name
        if name in BASELINES:
            assert usage["calls"] > 0 and usage["cost_usd"] > 0, name
    assert set(json.loads(second.stdout)["methods"]) == {"rag", "longcontext", "raptor"}
    # each method's calls went out under its own stage names
    assert {"longcontext", "codeagent", "rlm", "rlm-sub", "structrag-router", "structrag-structurize",
            "structrag-utilize", "rag-answer", "rag-embed", "memagent-read", "memagent-answer", "readagent-gist",
            "readagent-lookup", "readagent-answer", "raptor-summarize", "raptor-answer", "raptor-embed",
            "hipporag-ner", "hipporag-triples", "hipporag-filter", "hipporag-answer", "hipporag-embed",
            "linearrag-answer", "linearrag-embed", "arag-agent", "arag-embed", "fileagent"} <= stages
    for name in BASELINES:
        record = json.loads(next((tmp_path / "a" / name).glob("*.json")).read_text())
        assert record["by_stage"] and all(
            stage.startswith(name) or (name == "longcontext" and stage == "longcontext") for stage in record["by_stage"]
        ), (name, record["by_stage"])

    result = runner.invoke(eval_app, ["report", str(tmp_path / "a"), str(tmp_path / "b"),
                                      "--out", str(tmp_path / "rep"), "--no-plots"])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if line.startswith("| source | method"))
    assert "cost (USD)" in header
    for name in available_methods():
        assert f"| run | {name} | gpt-4o-mini |" in result.stdout, name
    rows = list(csv.DictReader((tmp_path / "rep" / "summary.csv").read_text().splitlines()))
    assert {r["method"] for r in rows if r["source"] == "run"} == set(available_methods())
    assert all(r["cost_usd"] != "" for r in rows if r["source"] == "run")
    report = json.loads(runner.invoke(eval_app, ["report", str(tmp_path / "a"), str(tmp_path / "b"), "--out",
                                                 str(tmp_path / "rep"), "--no-plots", "--json"]).stdout)
    runs = {r["method"]: r["usage"] for r in report["benchmarks"]["loong"]["runs"]}
    # billed, or served by the call cache from an identical earlier call (the second folder repeats three methods)
    assert all(u["cost_usd"] + u.get("saved_usd", 0) > 0 for u in runs.values()), runs


@pytest.fixture
def dracula():
    return shared_data("dracula")


@pytest.mark.parametrize("corpus", ["loong-en", "loong-zh", "dracula"])
def test_the_four_new_methods_run_through_eval_run(corpus, loong, dracula, tmp_path, clean_env):
    benchmark = corpus.split("-")[0]
    chosen = ["--languages", corpus.split("-")[1], "--sets", "1"] if benchmark == "loong" else []
    with FakeLLMServer() as server:
        result = runner.invoke(eval_app, [
            "run", "--benchmark", benchmark, "--data", str(loong if benchmark == "loong" else dracula), *chosen,
            "--limit", "1", "--method", "hipporag,linearrag,arag,fileagent", "-o", "hipporag.chunk_tokens=4000",
            "--base-url", server.base_url, "--out", str(tmp_path / "e"), "--json", "--quiet", "--no-plots"])
        assert result.exit_code == 0, result.output
        stages = {c["stage"] for c in server.calls()}
    summary = json.loads(result.stdout)["methods"]
    for name in ("hipporag", "linearrag", "arag", "fileagent"):
        assert summary[name]["n"] == 1 and summary[name]["outcomes"].get("failed", 0) == 0, (name, summary[name])
        assert summary[name]["usage"]["calls"] > 0, name
    assert {"hipporag-ner", "hipporag-triples", "hipporag-filter", "hipporag-answer", "linearrag-answer",
            "arag-agent", "fileagent", "judge"} <= stages
