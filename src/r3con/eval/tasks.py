"""Evaluation tasks, the filters that select them, and where each benchmark's data lives."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..corpus.documents import Document
from ..errors import ConfigError, InputError

BENCHMARKS = ("loong", "corpusqa", "dracula")

# The repository's data folder, for a checkout laid out as <root>/main (this repo) next to <root>/shared/data.
_REPO_ROOT = Path(__file__).resolve().parents[3]
_CHECKOUT_DATA = _REPO_ROOT.parent / "shared" / "data"


@dataclass(frozen=True)
class EvalTask:
    """One question of a benchmark: the task text, its documents, and the gold answer(s).

    `meta` holds the categories results are broken down by (level, set, domain, language, ...).
    `judge_question` and `judge_gold` are the question and gold answer as the benchmark's own evaluation
    code shows them to its judge (empty: `task_text` and `gold`).
    """

    id: str
    benchmark: str
    task_text: str
    documents: tuple[Document, ...]
    gold: str
    gold_lenient: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    judge_question: str = ""
    judge_gold: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))


@dataclass(frozen=True)
class TaskFilter:
    """Which tasks to keep; None means no restriction. `limit` applies last, in file order."""

    sets: tuple[int, ...] | None = None
    levels: tuple[int, ...] | None = None
    domains: tuple[str, ...] | None = None
    languages: tuple[str, ...] | None = None
    task_ids: tuple[str, ...] | None = None
    limit: int | None = None

    def keeps(self, task_id: str, meta: Mapping[str, Any]) -> bool:
        """Whether a task with this id and these categories passes every filter but the limit."""
        checks: list[tuple[tuple[Any, ...] | None, Any]] = [
            (self.sets, meta.get("set")),
            (self.levels, meta.get("level")),
            (self.domains, meta.get("domain")),
            (self.languages, meta.get("language")),
            (self.task_ids, task_id),
        ]
        return all(allowed is None or value in allowed for allowed, value in checks)

    def check_applies(self, benchmark: str, supported: Iterable[str]) -> None:
        """Raise ConfigError for a filter the benchmark has no category for (it would select nothing)."""
        supported = set(supported)
        for name in ("sets", "levels", "domains", "languages"):
            if getattr(self, name) is not None and name not in supported:
                options = ", ".join(f"--{s}" for s in sorted(supported)) or "only --tasks and --limit"
                raise ConfigError(f"--{name} does not apply to {benchmark}; it supports {options}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError("--limit must be at least 1")

    def describe(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class TaskSet:
    """The tasks a loader selected, and how many it had to skip and why (e.g. absent documents)."""

    benchmark: str
    tasks: tuple[EvalTask, ...]
    skipped: Mapping[str, int] = field(default_factory=dict)
    data_dir: Path = Path()
    filters: TaskFilter = TaskFilter()

    def __post_init__(self) -> None:
        object.__setattr__(self, "skipped", MappingProxyType(dict(self.skipped)))


def default_data_dir(benchmark: str, env: Mapping[str, str] | None = None) -> Path:
    """`$R3CON_DATA/<benchmark>` when R3CON_DATA is set, else `../shared/data/<benchmark>` beside the repo."""
    env = os.environ if env is None else env
    root = env.get("R3CON_DATA")
    return (Path(root).expanduser() if root else _CHECKOUT_DATA) / benchmark


def resolve_data_dir(benchmark: str, data: Path | None, env: Mapping[str, str] | None = None) -> Path:
    """The data path to read: `data` if given, else the default; it must exist."""
    path = data if data is not None else default_data_dir(benchmark, env)
    if not path.exists():
        hint = "pass --data PATH or set R3CON_DATA to the folder that holds it"
        if benchmark == "loong":
            hint += "; `r3con eval download --benchmark loong --to DIR` fetches it"
        raise InputError(f"no {benchmark} data at {path}; {hint}")
    return path


def read_jsonl(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-empty line; a broken line is an InputError naming it."""
    try:
        fh = path.open(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{number} is not valid JSON ({exc.msg}); restore the file") from exc
            if not isinstance(value, dict):
                raise InputError(f"{path}:{number} is not a JSON object; restore the file")
            yield number, value


def gold_text(value: Any) -> str:
    """A gold answer as text: strings as they are, lists and objects as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(task_id: str) -> str:
    """A file-name-safe form of a task id (ids are kept verbatim inside the files)."""
    name = _UNSAFE.sub("_", task_id).strip("._")[:80]
    if name == task_id:
        return name
    return f"{name or 'task'}-{hashlib.sha256(task_id.encode()).hexdigest()[:8]}"
