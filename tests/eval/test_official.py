"""A Loong evaluation over HTTP against the scripted server, scored again by Loong's own aggregation.

The aggregation below is MozerWang/Loong's, rewritten here line for line from src/utils/metric.py
(`extract_number`, `cal_metric`) and src/step4_cal_metric.py at commit e05a1fd: it reads the judge's
replies as upstream's evaluation file holds them and must give r3con's "official" numbers.
"""

import json
import re
import statistics

from typer.testing import CliRunner

from r3con.cli.eval_cmd import eval_app
from r3con.config import Settings
from r3con.eval.loong import load_loong
from r3con.eval.runner import EvalOptions, run_eval
from r3con.eval.tasks import TaskFilter
from r3con.testing import FakeLLMServer, FaultPlan

from ._fakes import FakeMethod, shared_data

runner = CliRunner()

# the four tasks of the committed Loong slice (in the real data too): sets 1-2, levels 1, 3 and 4
TASKS = ("13a4a371-6339-4c9d-82cf-fc9ab2bb017d", "153aaca4-bab8-4bf8-b0b6-795e1969187f",
         "ccc165c3-b068-4b97-9a50-17d9c5ae273f", "65ce3238-2780-47eb-826a-efda653bd5b4")


def extract_number(text):
    match = re.search(r"\[\[([0-9]*\.?[0-9]+)\]\]", text)
    if match:
        return float(match.group(1))
    match = re.search(r"\[([0-9]*\.?[0-9]+)\]", text)
    if match:
        return float(match.group(1))
    return None


def cal_metric(lines, tag, level=None, set=None):  # noqa: A002 - upstream's names
    scores = []
    effective_samples = []
    for line in lines:
        _level = line.get("level", None)
        _set = line.get("set", None)
        if level and _level and _level != level:
            continue
        if set and _set and _set != set:
            continue
        if extract_number(line[tag]) is not None:
            scores.append(extract_number(line[tag]))
            effective_samples.append(line)
    num_full_marks = sum(1 for x in scores if x == 100)
    if not effective_samples:  # upstream divides by zero here; such a cell has no numbers
        return None
    return (len(effective_samples) / len(lines), statistics.fmean(scores),
            f"{num_full_marks}/{len(effective_samples)}", num_full_marks / len(effective_samples))


def assert_as_upstream(official, out, method, data):
    """r3con's official numbers equal upstream's aggregation of the judge replies r3con kept."""
    rows = {r["id"]: r for r in map(json.loads, (data / "loong.jsonl").read_text().splitlines()) if r["id"] in TASKS}
    lines = []  # upstream's evaluation file: one line per answer, level and set from loong.jsonl, the reply
    for path in sorted((out / method).glob("*.json")):
        record = json.loads(path.read_text())
        row = rows[record["task_id"]]
        lines.append({"id": row["id"], "level": row["level"], "set": row["set"],
                      "eval_response": record["verdict"]["details"]["reply"]})
    assert len(lines) == len(TASKS)

    success, mean_score, marks, acc = cal_metric(lines, tag="eval_response")
    assert official["success_rate"] == round(success, 4) and official["mean_score"] == round(mean_score, 4)
    assert f"{official['correct']}/{official['counted']}" == marks and official["accuracy"] == round(100 * acc, 4)
    assert official["lines"] == len(lines)
    cells = official["breakdown"]["set x level"]
    for s in (1, 2, 3, 4):
        for lv in (1, 2, 3, 4):
            expected = cal_metric(lines, tag="eval_response", set=s, level=lv)
            key = f"set {s} level {lv}"
            if expected is None:
                assert key not in cells or cells[key]["counted"] == 0
                continue
            cell = cells[key]
            assert (cell["success_rate"], cell["mean_score"]) == (round(expected[0], 4), round(expected[1], 4))
            assert f"{cell['correct']}/{cell['counted']}" == expected[2]
    return lines


def test_a_loong_run_scores_as_loongs_own_aggregation_does(tmp_path, monkeypatch):
    for name in ("R3CON_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "R3CON_MODEL", "R3CON_DATA"):
        monkeypatch.delenv(name, raising=False)
    data, out = shared_data("loong"), tmp_path / "eval"
    with FakeLLMServer(port=0) as server:
        result = runner.invoke(eval_app, [
            "run", "--benchmark", "loong", "--data", str(data), "--out", str(out), "--sets", "all",
            "--tasks", ",".join(TASKS), "--method", "longcontext", "--base-url", server.base_url,
            "--json", "--quiet", "--no-plots"])
        assert result.exit_code == 0, result.output
        judged = [c for c in server.calls() if c["stage"] == "judge"]
    assert len(judged) == len(TASKS)
    official = json.loads(result.stdout)["methods"]["longcontext"]["official"]

    assert_as_upstream(official, out, "longcontext", data)


async def test_scored_unscored_and_perfect_replies_count_as_upstream_counts_them(tmp_path):
    """Gold answers rated 100, judge replies cut before their score (a truncating endpoint): upstream's
    aggregation and r3con's agree, and r3con's strict count keeps the unscored ones as wrong."""
    data, out = shared_data("loong"), tmp_path / "eval"
    task_set = load_loong(data, TaskFilter(task_ids=TASKS))
    golds = {t.task_text: t.gold for t in task_set.tasks[:2]}  # two tasks answered with their gold: rated 100
    method = FakeMethod(answers=golds, default="an answer that shares no word with any gold")
    faults = FaultPlan(rate_truncate=0.6, only="judge", seed=3, max_faults_per_request=5)
    with FakeLLMServer(port=0, faults=faults) as server:
        settings = Settings(base_url=server.base_url, model="r3con-scripted", cache=False)
        result = await run_eval(task_set, settings, out, EvalOptions(workers=1), method_fn=method)
    summary = result.summaries["r3con"]
    assert summary.official is not None
    lines = assert_as_upstream(summary.official.to_dict(), out, "r3con", data)
    unscored = [line for line in lines if extract_number(line["eval_response"]) is None]
    assert unscored and summary.official.overall.correct >= 1, "the case needs both a 100 and a reply without a score"
    assert summary.official.overall.counted == len(lines) - len(unscored)
    assert summary.official.left_out == {"judge reply without a score": len(unscored)}
    assert summary.n == len(lines) and summary.accuracy.correct == summary.official.overall.correct
