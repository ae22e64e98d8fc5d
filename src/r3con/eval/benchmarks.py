"""The benchmarks' loaders by name (`load_benchmark("loong", data)`), and the paper's task set beside what loaded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .corpusqa import load_corpusqa
from .dracula import load_dracula
from .loong import PAPER_SETS, load_loong
from .tasks import BENCHMARKS, TaskFilter, TaskSet


def load_benchmark(benchmark: str, data: Path, filters: TaskFilter = TaskFilter()) -> TaskSet:
    """Load the tasks of `benchmark` (loong, corpusqa, dracula) from `data`, keeping those `filters` select."""
    if benchmark == "loong":
        return load_loong(data, filters)
    if benchmark == "corpusqa":
        return load_corpusqa(data, filters)
    if benchmark == "dracula":
        return load_dracula(data, filters)
    raise ConfigError(f"unknown benchmark {benchmark!r}; use {', '.join(BENCHMARKS)}")


# The tasks the paper's tables are over: Loong's sets 2-4 in all three domains (legal included), and
# CorpusQA's 1M-token split (329 questions, of which the paper's table counts 327).
PAPER_TASKS = {"loong": 1277, "corpusqa": 329}
PAPER_SET = {"loong": "sets 2-4, legal included", "corpusqa": "the 1M-token split"}


@dataclass(frozen=True)
class Coverage:
    """How much of the paper's task set a loaded TaskSet holds, and why the rest is not here."""

    benchmark: str
    paper: int
    here: int
    missing: Mapping[str, int] = field(default_factory=dict)
    subset: bool = False  # filters (levels, domains, task ids, limit) chose part of what is here

    def line(self) -> str:
        """One line for the console: what of the paper's set runs, and the difference when some is absent."""
        head = f"{self.benchmark}: {self.here:,} of the paper's {self.paper:,} tasks ({PAPER_SET[self.benchmark]})"
        if self.subset:
            return f"{head} are selected by the filters"
        if not self.missing:
            return f"{head}: the paper's whole set"
        absent = "; ".join(f"{count:,} tasks ({reason})" for reason, count in self.missing.items())
        return f"{head}; not in this copy: {absent}"

    def to_dict(self) -> dict[str, Any]:
        return {"paper": self.paper, "here": self.here, "missing": dict(self.missing), "subset": self.subset}


def paper_coverage(task_set: TaskSet) -> Coverage | None:
    """The paper's task set beside `task_set` (Loong, CorpusQA); None for a benchmark without one."""
    benchmark = task_set.benchmark
    if benchmark not in PAPER_TASKS:
        return None
    f = task_set.filters
    if benchmark == "loong":
        in_set = [t for t in task_set.tasks if t.meta.get("set") in PAPER_SETS]
        sets_narrowed = f.sets is not None and not set(PAPER_SETS) <= set(f.sets)
    else:
        in_set, sets_narrowed = list(task_set.tasks), False
    subset = sets_narrowed or any(v is not None for v in (f.levels, f.domains, f.languages, f.task_ids, f.limit))
    missing = dict(task_set.skipped) if not subset else {}
    rest = PAPER_TASKS[benchmark] - len(in_set) - sum(missing.values())
    if rest > 0 and not subset:
        missing["tasks not in the data file"] = rest
    return Coverage(benchmark, PAPER_TASKS[benchmark], len(in_set), missing, subset)
