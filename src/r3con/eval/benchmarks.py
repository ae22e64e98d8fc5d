"""The benchmarks' loaders by name: `load_benchmark("loong", data)`."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .corpusqa import load_corpusqa
from .dracula import load_dracula
from .loong import load_loong
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
