"""Scores: micro-averaged accuracy with its standard error sqrt(p(1-p)/n), overall and per category.

Every finished task counts. A failed task, a step-capped one, an empty answer and a judge that failed
all count at the worst score (incorrect; rating 0). Answered tasks not judged yet are "pending" and
left out (a resumed run judges them).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..llm.types import Usage
from .judges import CAPPED, FAILED, JUDGED
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
        }


def _sort_key(value: str) -> tuple[int, float | str]:
    try:
        return (0, float(value))
    except ValueError:
        return (1, value)


def summarize(scores: Iterable[TaskScore], categories: Sequence[str] = (), *, pending: int = 0) -> Summary:
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
    return summarize(scores, CATEGORIES.get(benchmark, ()), pending=pending)


def method_cost(usage: Usage) -> float:
    """What a method's calls cost at the price table, whether the endpoint billed them or r3con's cache served them.

    Methods are compared on this, so that one method's calls served from a cache another method (or an
    earlier run) filled do not make it look cheaper than it is; `paid_usd` is what this evaluation billed.
    """
    return usage.cost_usd + usage.saved_usd
