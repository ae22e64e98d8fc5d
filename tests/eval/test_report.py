import csv

import pytest

from r3con.artifacts.tables import query
from r3con.config import Settings
from r3con.errors import InputError, ProviderError
from r3con.eval.judges import PAPER_JUDGE
from r3con.eval.report import build_report, load_reference, render_markdown, summary_rows, write_report
from r3con.eval.runner import EvalOptions, run_eval
from r3con.eval.tasks import TaskSet
from r3con.llm.types import Usage

from ..fakes import ScriptedLLM
from ._fakes import FakeMethod, judge_llm, make_task

RIGHT = '{"rationale": "ok", "score": 100}'
WRONG = '{"rationale": "no", "score": 40}'


async def loong_folder(path, model="m1"):
    tasks = TaskSet(
        benchmark="loong",
        tasks=tuple(make_task(f"t{i}", f"Q{i}?", "g", level=1 + i % 2, set=2, domain="paper", language="en")
                    for i in range(4)),
        skipped={"legal documents absent (doc/legal/legal.json)": 350},
    )
    judge = judge_llm(RIGHT, WRONG, RIGHT, WRONG)
    await run_eval(tasks, Settings(model=model), path, EvalOptions(workers=1, judge_protocol="r3con"), method_fn=FakeMethod(),
                   judge_llm=judge)
    return path


def test_reference_holds_the_papers_numbers():
    ref = load_reference()
    r3con = next(r for r in ref["corpusqa"] if r.method == "r3con")
    assert (r3con.accuracy, r3con.se, r3con.cost_usd, r3con.model) == (70.64, 2.52, 439, "Qwen3.5-35B-A3B")
    loong = {r.method: r for r in ref["loong"]}
    assert (loong["r3con"].accuracy, loong["r3con"].se, loong["r3con"].cost_usd) == (37.43, 1.35, 281)
    assert loong["codeagent"].accuracy == 29.01 and loong["codeagent"].cost_usd is None
    assert next(r for r in ref["corpusqa"] if r.method == "structrag").accuracy == 50.76
    assert r3con.category("level", "1") == "n/a"  # per-category tables are not available yet


async def test_report_files_show_the_run_beside_the_paper(tmp_path):
    folder = await loong_folder(tmp_path / "eval")
    report = build_report([folder])
    (row,) = report.rows
    assert (row.summary.accuracy.correct, row.summary.n) == (2, 4) and row.model == "m1"
    files = write_report(report, tmp_path / "report")
    names = {f.name for f in files}
    assert {"report.md", "summary.csv", "categories.csv", "report.json", "loong_pareto.png",
            "loong_categories.png"} <= names
    for f in files:
        assert f.stat().st_size > 0
        if f.suffix == ".png":
            assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| run | r3con | m1 | 4 | 50.00 | 25.00 |" in md  # accuracy 2/4, SE sqrt(.25/4)
    assert "37.43" in md and "1.35" in md and "281.00" in md and "29.01" in md
    assert "Skipped 350 tasks: legal documents absent" in md
    assert "### By level" in md and "100.00 ± 0.00 (2)" in md and "0.00 ± 0.00 (2)" in md
    rows = list(csv.DictReader((tmp_path / "report" / "summary.csv").read_text().splitlines()))
    assert [r["source"] for r in rows] == ["run", "paper", "paper"]
    assert rows[0]["accuracy"] == "50.0" and rows[0]["judge_calls"] == "4" and rows[0]["judge_cost_usd"] == "0.004"
    assert rows[0]["cost_usd"] == "0.04" and rows[1]["accuracy"] == "37.43"
    cats = list(csv.DictReader((tmp_path / "report" / "categories.csv").read_text().splitlines()))
    assert {(r["category"], r["value"]) for r in cats} >= {("level", "1"), ("level", "2"), ("set", "2")}
    # the same tables as Parquet, for SQL (r3con sql REPORT_DIR) and pandas
    columns, parquet = query(tmp_path / "report", "SELECT source, accuracy, judge_calls FROM summary")
    assert [(r[0], r[1]) for r in parquet] == [("run", 50.0), ("paper", 37.43), (rows[2]["source"], float(rows[2]["accuracy"]))]
    assert query(tmp_path / "report", "SELECT count(*) FROM categories")[1] == [(len(cats),)]
    tasks = query(tmp_path / "report", "SELECT method, model, count(*), sum(CASE WHEN correct THEN 1 ELSE 0 END) "
                                       "FROM tasks GROUP BY method, model")[1]
    assert tasks == [("r3con", "m1", 4, 2)]  # one row per task: 2 of 4 correct, as the summary says


async def test_cost_counts_calls_served_from_the_cache_and_paid_shows_the_bill(tmp_path):
    tasks = TaskSet(benchmark="loong", tasks=(make_task("t0", "Q0?", "g", level=1, set=2, domain="paper"),))
    cached = Usage(calls=1, prompt_tokens=100, completion_tokens=10, cost_usd=0.01, cache_hits=2, saved_usd=0.03)
    await run_eval(tasks, Settings(model="m1"), tmp_path / "eval", EvalOptions(workers=1, judge_protocol="r3con"),
                   method_fn=FakeMethod(usage=cached), judge_llm=judge_llm(RIGHT))
    (row,) = [r for r in summary_rows(build_report([tmp_path / "eval"]), "loong") if r["source"] == "run"]
    assert (row["cost_usd"], row["paid_usd"], row["cache_hits"], row["calls"]) == (0.04, 0.01, 2, 1)


async def test_folders_with_other_models_become_rows_of_one_report(tmp_path):
    a = await loong_folder(tmp_path / "a", model="small")
    b = await loong_folder(tmp_path / "b", model="large")
    report = build_report([a, b])
    assert sorted(r.model for r in report.rows) == ["large", "small"]
    assert "| run | r3con | small |" in render_markdown(report)
    assert len(write_report(report, tmp_path / "r", plots=False)) == 7  # md, 2 csv, json, 3 parquet


def test_a_folder_without_an_evaluation_is_refused(tmp_path):
    with pytest.raises(InputError, match="holds no evaluation"):
        build_report([tmp_path])


async def official_corpusqa_folder(path, judge_model):
    tasks = TaskSet(benchmark="corpusqa", tasks=tuple(
        make_task(f"{d}_{i}", f"Q{d}{i}?", "g", benchmark="corpusqa", domain=d) for d in ("financial_en", "education_en")
        for i in range(2)))
    judge = ScriptedLLM(replies=["[[YES]]", "[[NO]]", "Same.\n[[YES]]", "no verdict"], model=judge_model)
    method = FakeMethod(errors={"Qeducation_en1?": ProviderError("down", status=500)})  # one task fails: no answer
    await run_eval(tasks, Settings(model="m1"), path, EvalOptions(workers=1), method_fn=method, judge_llm=judge)
    return path


async def test_a_report_says_when_its_judge_is_not_the_papers(tmp_path):
    folder = await official_corpusqa_folder(tmp_path / "eval", "some-local-model")
    report = build_report([folder])
    text = render_markdown(report)
    assert "Judge: some-local-model (official protocol, prompt corpusqa_official)" in text
    assert "Not the paper's setting: the judge (some-local-model) is not the paper's (gpt-5.4-mini)" in text
    assert report.to_dict()["benchmarks"]["corpusqa"]["judge_differs_from_papers"] is True
    # the benchmark's own count (the failed task has no answer upstream) beside r3con's, and the paper's n
    assert "| run | r3con | m1 | 66.67 (2/3) | 3 | 1 method failed (no answer upstream) | 50.00 ± 25.00 (2/4) |" in text
    assert "| paper | R3CON | Qwen3.5-35B-A3B | 70.64 ± 2.52 (231/327) | 327 |" in text
    assert "#### Official, by domain" in text
    assert "| run | r3con | m1 | 100.00 (1/1) | 50.00 (1/2) |" in text  # education_en, financial_en


async def test_the_papers_judge_under_the_official_protocol_gets_no_warning(tmp_path):
    text = render_markdown(build_report([await official_corpusqa_folder(tmp_path / "eval", PAPER_JUDGE)]))
    assert f"Judge: {PAPER_JUDGE} (official protocol" in text and "Not the paper's setting" not in text
    r3con_protocol = render_markdown(build_report([await loong_folder(tmp_path / "loong")]))
    assert "judged under the r3con protocol, not the benchmark's own prompt and parser" in r3con_protocol
