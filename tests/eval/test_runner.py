import asyncio
import json

import pytest

from r3con.config import Settings
from r3con.errors import BudgetExceeded, ConfigError, EndpointUnreachable, ProviderError, RunFailed
from r3con.eval.judges import CAPPED, FAILED, JUDGE_ERROR, JUDGED
from r3con.eval.records import read_record, record_path
from r3con.eval.runner import EvalOptions, run_eval
from r3con.eval.tasks import TaskSet
from r3con.testing import FakeLLMServer

from ._fakes import FakeMethod, judge_llm, make_task

RIGHT = '{"rationale": "ok", "score": 100}'
WRONG = '{"rationale": "no", "score": 40}'

TASKS = TaskSet(
    benchmark="loong",
    tasks=(
        make_task("t1", "Question one?", "one", level=1, set=2),
        make_task("t2", "Question two?", "two", level=2, set=2),
        make_task("t3", "Question three?", "three", level=2, set=3),
    ),
    skipped={"legal documents absent": 5},
)


def judge_by_answer(request):
    """Right when the answer equals the gold (read back from the prompt's tags)."""
    text = request.messages[0].content
    answer = text.split("<answer>\n", 1)[1].split("\n</answer>", 1)[0]
    gold = text.split("<gold>\n", 1)[1].split("\n</gold>", 1)[0]
    return RIGHT if answer == gold else WRONG


async def evaluate(out, method, judge, **options):
    return await run_eval(TASKS, Settings(model="m1"), out, EvalOptions(judge_protocol="r3con", **options), method_fn=method,
                          judge_llm=judge)


async def test_a_run_writes_one_record_per_task_and_scores_them(tmp_path):
    method = FakeMethod(answers={"Question one?": "one", "Question two?": "two"}, default="wrong")
    judge = judge_llm(default=judge_by_answer)
    result = await evaluate(tmp_path, method, judge, methods=["fake"])
    assert result.ran == 3 and result.judged == 3
    summary = result.summaries["fake"]
    assert (summary.accuracy.correct, summary.n) == (2, 3)
    assert summary.by_category["level"]["2"].correct == 1
    record = read_record(record_path(tmp_path, "fake", "t1"))
    assert record.answer == "one" and record.verdict is not None and record.verdict.status == JUDGED
    assert record.usage.cost_usd == pytest.approx(0.01) and record.model == "m1"
    assert record.run_dir == "fake/runs/t1" and (tmp_path / "fake" / "runs" / "t1").is_dir()
    assert result.judge_usage["fake"].calls == 3 and result.usage["fake"].calls == 9
    manifest = json.loads((tmp_path / "eval.json").read_text())
    assert manifest["benchmark"] == "loong" and manifest["task_ids"] == ["t1", "t2", "t3"]
    assert manifest["skipped"] == {"legal documents absent": 5} and manifest["methods"] == ["fake"]


async def test_a_second_run_makes_no_method_and_no_judge_calls(tmp_path):
    await evaluate(tmp_path, FakeMethod(), judge_llm(default=judge_by_answer))
    method, judge = FakeMethod(), judge_llm()  # any call to this judge fails the test
    result = await evaluate(tmp_path, method, judge)
    assert method.calls == [] and judge.history == []
    assert result.ran == 0 and result.judged == 0 and result.summaries["r3con"].n == 3


async def test_an_answered_unjudged_task_is_only_judged(tmp_path):
    # The first run is interrupted by a judge outage: answers are saved, verdicts are not.
    class Interrupted(Exception):
        pass

    class Outage:
        async def complete(self, request):
            raise Interrupted

    with pytest.raises(Interrupted):
        await evaluate(tmp_path, FakeMethod(default="one"), Outage(), workers=1)
    saved = [read_record(p) for p in sorted((tmp_path / "r3con").glob("*.json"))]
    assert saved and all(r.verdict is None for r in saved)
    method, judge = FakeMethod(), judge_llm(default=judge_by_answer)
    result = await evaluate(tmp_path, method, judge)
    assert [c[1] for c in method.calls] == [t.task_text for t in TASKS.tasks if t.id not in {r.task_id for r in saved}]
    assert len(judge.history) == 3 and result.judged == 3


async def test_a_judge_error_is_judged_again_on_resume(tmp_path):
    judge = judge_llm(ProviderError("503"), default=judge_by_answer)
    result = await evaluate(tmp_path, FakeMethod(default="one"), judge, workers=1)
    assert result.summaries["r3con"].outcomes.get(JUDGE_ERROR) == 1
    judge = judge_llm(default=judge_by_answer)
    result = await evaluate(tmp_path, FakeMethod(), judge)
    assert len(judge.history) == 1 and result.summaries["r3con"].outcomes.get(JUDGE_ERROR) is None


async def test_failed_and_capped_tasks_count_at_worst_without_judge_calls(tmp_path):
    method = FakeMethod(answers={"Question one?": "one", "Question two?": "two"},
                        capped={"Question two?"}, errors={"Question three?": RunFailed("agent crashed")})
    judge = judge_llm(default=judge_by_answer)
    result = await evaluate(tmp_path, method, judge)
    summary = result.summaries["r3con"]
    assert (summary.accuracy.correct, summary.n) == (1, 3)
    assert summary.outcomes[FAILED] == 1 and summary.outcomes[CAPPED] == 1
    assert len(judge.history) == 1
    failed = read_record(record_path(tmp_path, "r3con", "t3"))
    assert failed.status == "failed" and "RunFailed: agent crashed" in failed.error
    # --retry-failed runs only the failed task again; --score-capped would judge capped answers
    method = FakeMethod(default="three")
    result = await evaluate(tmp_path, method, judge_llm(default=judge_by_answer), retry_failed=True)
    assert [c[1] for c in method.calls] == ["Question three?"]
    assert result.summaries["r3con"].accuracy.correct == 2


async def test_step_capped_answers_are_judged_with_score_capped(tmp_path):
    method = FakeMethod(default="one", capped={"Question one?"})
    judge = judge_llm(default=judge_by_answer)
    result = await evaluate(tmp_path, method, judge, score_capped=True)
    assert len(judge.history) == 3 and result.summaries["r3con"].accuracy.correct == 1


async def test_a_configuration_error_stops_the_whole_evaluation(tmp_path):
    method = FakeMethod(errors={"Question one?": EndpointUnreachable("no server at http://x; pass --base-url")})
    with pytest.raises(EndpointUnreachable, match="pass --base-url"):
        await evaluate(tmp_path, method, judge_llm(default=judge_by_answer), workers=1)


async def test_methods_run_side_by_side_and_workers_bound_concurrency(tmp_path):
    running, peak = 0, 0

    class Slow(FakeMethod):
        async def __call__(self, *args):
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1
            return await super().__call__(*args)

    result = await evaluate(tmp_path, Slow(), judge_llm(default=judge_by_answer), methods=["a", "b"], workers=2)
    assert peak == 2
    assert set(result.summaries) == {"a", "b"} and all(s.n == 3 for s in result.summaries.values())
    assert (tmp_path / "a" / "t1.json").is_file() and (tmp_path / "b" / "t1.json").is_file()


async def test_a_folder_of_another_benchmark_or_judge_prompt_is_refused(tmp_path):
    from r3con.eval.judges import JudgePrompt

    await evaluate(tmp_path, FakeMethod(), judge_llm(default=judge_by_answer))
    other = TaskSet(benchmark="corpusqa", tasks=())
    with pytest.raises(ConfigError, match="holds a loong evaluation"):
        await run_eval(other, Settings(), tmp_path, EvalOptions(judge_protocol="r3con"), method_fn=FakeMethod(), judge_llm=judge_llm())
    prompt = JudgePrompt("file:mine.j2", "<task>{{ task }}</task><answer>{{ answer }}</answer><gold>{{ gold }}</gold>")
    with pytest.raises(ConfigError, match="--rejudge"):
        await evaluate(tmp_path, FakeMethod(), judge_llm(), judge_prompt=prompt)
    judge = judge_llm(default=RIGHT)
    method = FakeMethod()
    result = await evaluate(tmp_path, method, judge, judge_prompt=prompt, rejudge=True)
    assert method.calls == [] and len(judge.history) == 3 and result.summaries["r3con"].accuracy.correct == 3


async def test_no_judge_client_is_opened_when_nothing_needs_judging(tmp_path):
    await evaluate(tmp_path, FakeMethod(), judge_llm(default=judge_by_answer))
    # no judge_llm and no endpoint configured: a finished evaluation still reports
    result = await run_eval(TASKS, Settings(), tmp_path, EvalOptions(judge_protocol="r3con"), method_fn=FakeMethod())
    assert result.summaries["r3con"].n == 3


async def test_a_baseline_stopped_by_the_cost_cap_stops_the_evaluation_and_is_not_recorded_failed(tmp_path):
    """structrag's per-document fan-out used to turn the budget stop into document failures, then a FAILED task."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"r3con-scripted": {"input": 1.0, "output": 100.0}}))
    one = TaskSet(benchmark="loong", tasks=TASKS.tasks[:1])
    with FakeLLMServer() as server:
        capped = Settings.resolve(env={}, base_url=server.base_url, prices_file=prices, max_cost_usd=0.1, cache=False)
        with pytest.raises(BudgetExceeded, match="--max-cost"):
            await run_eval(one, capped, tmp_path, EvalOptions(methods=("structrag",), judge_protocol="r3con"),
                                judge_llm=judge_llm(default=judge_by_answer))
        assert {c["stage"] for c in server.calls()} == {"structrag-router"}  # stopped before the structurizer's calls
        assert not record_path(tmp_path, "structrag", "t1").exists()  # not FAILED: a rerun with a higher cap runs it
        raised = Settings.resolve(env={}, base_url=server.base_url, prices_file=prices, max_cost_usd=5.0, cache=False)
        result = await run_eval(one, raised, tmp_path, EvalOptions(methods=("structrag",), judge_protocol="r3con"),
                                judge_llm=judge_llm(default=judge_by_answer))
    assert read_record(record_path(tmp_path, "structrag", "t1")).status != FAILED
    assert result.ran == 1


async def test_a_slow_judge_reports_progress_while_it_works(tmp_path, monkeypatch):
    monkeypatch.setattr("r3con.eval.runner.JUDGE_HEARTBEAT_S", 0.05)

    class SlowJudge:
        async def complete(self, request):
            await asyncio.sleep(0.3)
            return await judge_llm(default=judge_by_answer).complete(request)

    seen: list[tuple[str, str]] = []
    one = TaskSet(benchmark="loong", tasks=TASKS.tasks[:1])
    await run_eval(one, Settings(model="m1"), tmp_path, EvalOptions(methods=["r3con"], judge_protocol="r3con"),
                   method_fn=FakeMethod(), judge_llm=SlowJudge(), on_record=lambda record, action: seen.append((record.task_id, action)))
    beats = [action for _, action in seen if action.startswith("judging")]
    assert len(beats) >= 2 and all(a.endswith(" s") for a in beats), seen
    assert seen[-1] == ("t1", "ran"), "the task is reported done once, after its judge"
