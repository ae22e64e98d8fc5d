"""Scores, counted two ways side by side.

r3con's (strict): micro-averaged accuracy with its standard error sqrt(p(1-p)/n), overall and per
category. Every finished task counts. A failed task, a step-capped one, an empty answer and a judge
that failed all count at the worst score (incorrect; rating 0). Answered tasks not judged yet are
"pending" and left out (a resumed run judges them).

The benchmark's own (`OfficialScore`), as its evaluation code counts the same verdicts:

    loong     MozerWang/Loong src/utils/metric.py `cal_metric`, src/step4_cal_metric.py: over the
              answers in the evaluation file, those whose judge reply holds no score leave both
              averages (mean score, and accuracy = rated 100 / scored); the scoring success rate is
              scored / every answer in the file (in a set x level cell too, as upstream divides);
              overall, per level, per set, per set x level
    corpusqa  Tongyi-Zhiwen/CorpusQA src/eval.py: correct / evaluated, a judge reply without a
              verdict or a failed judge call counted wrong; overall and per domain

Tasks whose method failed or hit its step bound have no answer in upstream's files (its inference
script writes none), so they leave the official denominators; r3con counts them wrong. An empty answer
(never sent to the judge) is wrong for CorpusQA, whose judge would compare "" with the gold; for Loong
it leaves the count too, as upstream's `failure_prompts` sends empty answers back to be generated again.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..llm.types import Usage
from .judges import CAPPED, EMPTY, FAILED, JUDGE_ERROR, JUDGED
from .records import TaskRecord

CATEGORIES: Mapping[str, tuple[str, ...]] = {
    "loong": ("level", "set", "domain", "language"),
    "corpusqa": ("domain", "language", "difficulty", "level"),
    "dracula": (),
}


@dataclass(frozen=True)
class Accuracy:
    """`correct` of `n`; `p` and its standard error, and both in percent."""

    correct: int
    n: int

    @property
    def p(self) -> float:
        return self.correct / self.n if self.n else 0.0

    @property
    def se(self) -> float:
        return math.sqrt(self.p * (1 - self.p) / self.n) if self.n else 0.0

    @property
    def percent(self) -> float:
        return 100 * self.p

    @property
    def se_percent(self) -> float:
        return 100 * self.se

    def __str__(self) -> str:
        return f"{self.percent:.2f} ± {self.se_percent:.2f}"

    def to_dict(self) -> dict[str, Any]:
        return {"correct": self.correct, "n": self.n, "accuracy": round(self.percent, 4), "se": round(self.se_percent, 4)}


def accuracy(correct: int, n: int) -> Accuracy:
    """Micro-averaged accuracy of `correct` out of `n` tasks."""
    if n < 0 or not 0 <= correct <= n:
        raise ValueError(f"need 0 <= correct <= n, got {correct} of {n}")
    return Accuracy(correct, n)


@dataclass(frozen=True)
class Mean:
    """A mean with its standard error (sample standard deviation over sqrt(n))."""

    mean: float
    se: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"mean": round(self.mean, 4), "se": round(self.se, 4), "n": self.n}


def mean(values: Sequence[float]) -> Mean:
    if not values:
        return Mean(0.0, 0.0, 0)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return Mean(statistics.fmean(values), se, len(values))


@dataclass(frozen=True)
class TaskScore:
    """One finished task as the scorer counts it."""

    task_id: str
    meta: Mapping[str, Any]
    outcome: str  # a verdict status: judged, empty, failed, capped, judge_failed, judge_error
    correct: bool
    rating: float | None = None  # Loong: the judge's 1-100, or 0 at the worst score
    lenient_correct: bool | None = None
    degraded: bool = False


def task_score(record: TaskRecord) -> TaskScore | None:
    """How `record` counts, or None while it is pending (answered, not judged)."""
    verdict = record.verdict
    if verdict is None:
        return None
    judged = verdict.status == JUDGED
    rating: float | None = None
    if record.benchmark == "loong":
        rating = float(verdict.rating) if judged and verdict.rating is not None else 0.0
    lenient = verdict.lenient_correct if judged else (False if verdict.lenient_correct is not None else None)
    return TaskScore(
        task_id=record.task_id,
        meta=record.meta,
        outcome=verdict.status,
        correct=judged and verdict.correct,
        rating=rating,
        lenient_correct=lenient,
        degraded=bool(record.degraded),
    )


def _sort_key(value: str) -> tuple[int, float | str]:
    try:
        return (0, float(value))
    except ValueError:
        return (1, value)


@dataclass(frozen=True)
class OfficialCell:
    """One line of the benchmark's own report: `lines` answers in the evaluation file, `counted` in the
    accuracy's denominator (Loong: those scored), `correct` of them; Loong's mean score and success rate."""

    lines: int
    counted: int
    correct: int
    mean_score: float | None = None
    success_rate: float | None = None

    @property
    def accuracy(self) -> float | None:
        """Percent correct of `counted`; None where upstream would divide by zero."""
        return 100 * self.correct / self.counted if self.counted else None

    def __str__(self) -> str:
        return "n/a" if self.accuracy is None else f"{self.accuracy:.2f} ({self.correct}/{self.counted})"

    def to_dict(self) -> dict[str, Any]:
        acc = self.accuracy
        return {
            "lines": self.lines, "counted": self.counted, "correct": self.correct,
            "accuracy": None if acc is None else round(acc, 4),
            "mean_score": None if self.mean_score is None else round(self.mean_score, 4),
            "success_rate": None if self.success_rate is None else round(self.success_rate, 4),
        }


@dataclass(frozen=True)
class OfficialScore:
    """The benchmark's own numbers over the same verdicts (module docstring), with what left its count."""

    benchmark: str
    overall: OfficialCell
    left_out: Mapping[str, int] = field(default_factory=dict)  # why finished tasks are not in `counted`
    breakdown: Mapping[str, Mapping[str, OfficialCell]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            **self.overall.to_dict(),
            "left_out": dict(self.left_out),
            "breakdown": {k: {v: cell.to_dict() for v, cell in cells.items()} for k, cells in self.breakdown.items()},
        }


OFFICIAL_BREAKDOWNS: Mapping[str, tuple[str, ...]] = {
    "loong": ("level", "set", "set x level"),
    "corpusqa": ("domain",),
}


def _official_key(score: TaskScore, breakdown: str) -> str | None:
    if breakdown == "set x level":
        s, lv = score.meta.get("set"), score.meta.get("level")
        return None if s is None or lv is None else f"set {s} level {lv}"
    value = score.meta.get(breakdown)
    return None if value is None else str(value)


def _loong_cell(cell: Sequence[TaskScore], all_lines: int) -> OfficialCell:
    scored = [s.rating for s in cell if s.outcome == JUDGED and s.rating is not None]
    return OfficialCell(
        lines=len(cell),
        counted=len(scored),
        correct=sum(1 for r in scored if r == 100),
        mean_score=statistics.fmean(scored) if scored else None,
        success_rate=len(scored) / all_lines if all_lines else None,
    )


def _corpusqa_cell(cell: Sequence[TaskScore], all_lines: int) -> OfficialCell:
    return OfficialCell(lines=len(cell), counted=len(cell), correct=sum(1 for s in cell if s.correct))


def official_score(scores: Iterable[TaskScore], benchmark: str) -> OfficialScore | None:
    """The benchmark's own aggregation of `scores` (Loong, CorpusQA), or None for a benchmark without one."""
    if benchmark not in OFFICIAL_BREAKDOWNS:
        return None
    scores = list(scores)
    dropped = (FAILED, CAPPED, EMPTY) if benchmark == "loong" else (FAILED, CAPPED)
    lines = [s for s in scores if s.outcome not in dropped]
    left_out = Counter({"method failed (no answer upstream)": sum(s.outcome == FAILED for s in scores),
                        "method step-capped (no answer upstream)": sum(s.outcome == CAPPED for s in scores)})
    if benchmark == "loong":
        left_out["empty answer (upstream generates it again)"] = sum(s.outcome == EMPTY for s in scores)
    cell_of = _loong_cell if benchmark == "loong" else _corpusqa_cell
    overall = cell_of(lines, len(lines))
    if benchmark == "loong":
        errors = sum(s.outcome == JUDGE_ERROR for s in lines)
        left_out["judge call failed (a resumed run judges it again)"] = errors
        left_out["judge reply without a score"] = overall.lines - overall.counted - errors
    groups: dict[str, dict[str, list[TaskScore]]] = defaultdict(lambda: defaultdict(list))
    for s in lines:
        for name in OFFICIAL_BREAKDOWNS[benchmark]:
            key = _official_key(s, name)
            if key is not None:
                groups[name][key].append(s)
    breakdown = {
        name: {key: cell_of(cell, len(lines)) for key, cell in sorted(groups[name].items(), key=lambda kv: _sort_key(kv[0]))}
        for name in OFFICIAL_BREAKDOWNS[benchmark]
        if name in groups
    }
    return OfficialScore(benchmark, overall, {k: v for k, v in left_out.items() if v}, breakdown)


@dataclass(frozen=True)
class Summary:
    """Accuracy (and Loong's mean rating, Dracula's lenient accuracy) over the finished tasks."""

    accuracy: Accuracy
    outcomes: Mapping[str, int]
    pending: int = 0
    degraded: int = 0
    rating: Mean | None = None
    lenient: Accuracy | None = None
    by_category: Mapping[str, Mapping[str, Accuracy]] = field(default_factory=dict)
    official: OfficialScore | None = None  # the benchmark's own counting of the same verdicts

    @property
    def n(self) -> int:
        return self.accuracy.n

    @property
    def worst_scored(self) -> int:
        """Tasks counted at the worst score without a judgment (failed, capped, empty, judge failures)."""
        return sum(v for k, v in self.outcomes.items() if k != JUDGED)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.accuracy.to_dict(),
            "outcomes": dict(self.outcomes),
            "failed": self.outcomes.get(FAILED, 0),
            "capped": self.outcomes.get(CAPPED, 0),
            "pending": self.pending,
            "degraded": self.degraded,
            "rating": self.rating.to_dict() if self.rating else None,
            "lenient": self.lenient.to_dict() if self.lenient else None,
            "by_category": {
                key: {value: acc.to_dict() for value, acc in values.items()} for key, values in self.by_category.items()
            },
            "official": self.official.to_dict() if self.official else None,
        }


def summarize(
    scores: Iterable[TaskScore], categories: Sequence[str] = (), *, pending: int = 0, benchmark: str = ""
) -> Summary:
    """Micro-averaged accuracy over `scores`, overall and per value of each category in `categories`."""
    scores = list(scores)
    outcomes = Counter(s.outcome for s in scores)
    counts: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for s in scores:
        for key in categories:
            value = s.meta.get(key)
            if value is None:
                continue
            cell = counts[key][str(value)]
            cell[0] += s.correct
            cell[1] += 1
    by_category = {
        key: {value: accuracy(c, n) for value, (c, n) in sorted(values.items(), key=lambda kv: _sort_key(kv[0]))}
        for key, values in counts.items()
    }
    ratings = [s.rating for s in scores if s.rating is not None]
    lenients = [s.lenient_correct for s in scores if s.lenient_correct is not None]
    return Summary(
        accuracy=accuracy(sum(s.correct for s in scores), len(scores)),
        outcomes=dict(outcomes),
        pending=pending,
        degraded=sum(s.degraded for s in scores),
        rating=mean(ratings) if ratings else None,
        lenient=accuracy(sum(lenients), len(lenients)) if lenients else None,
        by_category=by_category,
        official=official_score(scores, benchmark),
    )


def summarize_records(records: Iterable[TaskRecord], benchmark: str) -> Summary:
    """Score and summarize task records of one benchmark, counting the pending ones."""
    scores, pending = [], 0
    for record in records:
        score = task_score(record)
        if score is None:
            pending += 1
        else:
            scores.append(score)
    return summarize(scores, CATEGORIES.get(benchmark, ()), pending=pending, benchmark=benchmark)


def method_cost(usage: Usage) -> float:
    """What a method's calls cost at the price table, whether the endpoint billed them or r3con's cache served them.

    Methods are compared on this, so that one method's calls served from a cache another method (or an
    earlier run) filled do not make it look cheaper than it is; `paid_usd` is what this evaluation billed.
    """
    return usage.cost_usd + usage.saved_usd
