import pytest

from r3con.eval.judges import CAPPED, EMPTY, FAILED, JUDGE_ERROR, JUDGE_FAILED, JUDGED, Verdict
from r3con.eval.records import TaskRecord
from r3con.eval.scoring import accuracy, summarize, summarize_records, task_score


def test_accuracy_matches_the_papers_corpusqa_number():
    acc = accuracy(231, 327)
    assert f"{acc.percent:.2f}" == "70.64"
    assert f"{acc.se_percent:.2f}" == "2.52"
    assert str(acc) == "70.64 ± 2.52"


@pytest.mark.parametrize(
    ("correct", "n", "percent", "se"),
    [(1, 2, 50.0, 35.36), (0, 4, 0.0, 0.0), (4, 4, 100.0, 0.0), (1, 10, 10.0, 9.49), (0, 0, 0.0, 0.0)],
)
def test_accuracy_hand_computed(correct, n, percent, se):
    acc = accuracy(correct, n)
    assert round(acc.percent, 2) == percent
    assert round(acc.se_percent, 2) == se


def test_accuracy_rejects_impossible_counts():
    with pytest.raises(ValueError):
        accuracy(5, 4)


def record(task_id, verdict, benchmark="loong", **meta):
    return TaskRecord(task_id=task_id, benchmark=benchmark, method="m", model=None, status="answered",
                      meta=meta, verdict=verdict)


def test_failures_count_at_the_worst_score_and_pending_tasks_are_left_out():
    records = [
        record("a", Verdict(JUDGED, correct=True, rating=100), level=1, set=2),
        record("b", Verdict(JUDGED, correct=False, rating=80), level=1, set=3),
        record("c", Verdict(FAILED), level=2, set=2),
        record("d", Verdict(CAPPED), level=2, set=2),
        record("e", Verdict(JUDGE_FAILED), level=2, set=3),
        record("f", Verdict(EMPTY), level=2, set=3),
        record("g", None, level=2, set=3),  # answered, not judged yet
    ]
    summary = summarize_records(records, "loong")
    assert summary.n == 6
    assert summary.accuracy.correct == 1
    assert summary.pending == 1
    assert summary.worst_scored == 4
    assert summary.outcomes[FAILED] == 1 and summary.outcomes[CAPPED] == 1
    # mean rating: 100 and 80 judged, four at 0
    assert summary.rating is not None and summary.rating.mean == pytest.approx(30.0)
    assert summary.by_category["level"]["1"].correct == 1 and summary.by_category["level"]["1"].n == 2
    assert summary.by_category["level"]["2"].n == 4 and summary.by_category["level"]["2"].correct == 0
    assert set(summary.by_category["set"]) == {"2", "3"}


def test_a_judge_error_counts_at_worst_even_if_a_field_says_correct():
    score = task_score(record("a", Verdict("judge_error", correct=True, rating=100)))
    assert score is not None and not score.correct and score.rating == 0.0


def test_lenient_accuracy_is_summarised_apart():
    records = [
        record("a", Verdict(JUDGED, correct=False, lenient_correct=True), benchmark="dracula"),
        record("b", Verdict(JUDGED, correct=True, lenient_correct=True), benchmark="dracula"),
        record("c", Verdict(FAILED, lenient_correct=False), benchmark="dracula"),
    ]
    summary = summarize_records(records, "dracula")
    assert summary.accuracy.correct == 1 and summary.accuracy.n == 3
    assert summary.lenient is not None and summary.lenient.correct == 2
    assert summary.rating is None


def test_category_values_sort_numerically():
    scores = [task_score(record(str(i), Verdict(JUDGED, correct=True, rating=100), level=lv)) for i, lv in
              enumerate([10, 2, 1])]
    summary = summarize([s for s in scores if s], ("level",))
    assert list(summary.by_category["level"]) == ["1", "2", "10"]


def test_loong_official_counting_leaves_unscored_answers_out_of_both_averages():
    records = [
        record("a", Verdict(JUDGED, correct=True, rating=100.0), level=1, set=2),
        record("b", Verdict(JUDGED, rating=87.5), level=1, set=2),
        record("c", Verdict(JUDGE_FAILED), level=2, set=2),  # the reply held no score
        record("d", Verdict(JUDGE_ERROR), level=2, set=3),  # the judge call failed
        record("e", Verdict(FAILED), level=2, set=3),  # the method failed: no answer upstream
        record("f", Verdict(EMPTY), level=2, set=3),  # upstream generates an empty answer again
    ]
    summary = summarize_records(records, "loong")
    official = summary.official
    assert official is not None
    # official: 1 of the 2 scored answers rated 100; mean of 100 and 87.5; 2 scored of the 4 answers
    assert (official.overall.correct, official.overall.counted, official.overall.lines) == (1, 2, 4)
    assert official.overall.accuracy == 50.0 and official.overall.mean_score == 93.75
    assert official.overall.success_rate == 0.5
    assert official.left_out == {"judge reply without a score": 1, "method failed (no answer upstream)": 1,
                                 "judge call failed (a resumed run judges it again)": 1,
                                 "empty answer (upstream generates it again)": 1}
    # r3con's strict count beside it: all six finished tasks, every failure wrong
    assert (summary.accuracy.correct, summary.accuracy.n) == (1, 6)
    cells = official.breakdown["set x level"]
    assert set(cells) == {"set 2 level 1", "set 2 level 2", "set 3 level 2"}
    assert (cells["set 2 level 1"].correct, cells["set 2 level 1"].counted) == (1, 2)
    assert cells["set 2 level 2"].accuracy is None and cells["set 2 level 2"].lines == 1
    # upstream divides a cell's scored answers by every answer in the file
    assert cells["set 2 level 1"].success_rate == 0.5
    assert set(official.breakdown) == {"level", "set", "set x level"}


def test_corpusqa_official_counting_is_correct_over_evaluated_per_domain():
    records = [
        record("financial_en_1", Verdict(JUDGED, correct=True), "corpusqa", domain="financial_en"),
        record("financial_en_2", Verdict(JUDGE_FAILED), "corpusqa", domain="financial_en"),  # no verdict: wrong
        record("education_en_1", Verdict(JUDGE_ERROR), "corpusqa", domain="education_en"),  # call failed: wrong
        record("education_en_2", Verdict(EMPTY), "corpusqa", domain="education_en"),  # "" judged: wrong
        record("education_en_3", Verdict(FAILED), "corpusqa", domain="education_en"),  # never answered: left out
        record("education_en_4", Verdict(CAPPED), "corpusqa", domain="education_en"),
    ]
    summary = summarize_records(records, "corpusqa")
    official = summary.official
    assert official is not None
    assert (official.overall.correct, official.overall.counted) == (1, 4)
    assert official.overall.mean_score is None and official.overall.success_rate is None
    assert {k: (c.correct, c.counted) for k, c in official.breakdown["domain"].items()} == {
        "education_en": (0, 2), "financial_en": (1, 2)}
    assert (summary.accuracy.correct, summary.accuracy.n) == (1, 6)
    assert summarize_records(records[:1], "dracula").official is None
