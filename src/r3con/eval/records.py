"""One JSON file per (method, task): the answer, its cost and timing, and the verdict, written atomically.

Layout of an evaluation folder:

    OUT/eval.json              what was evaluated: benchmark, methods, task ids, skipped, settings, judge
    OUT/METHOD/TASK_ID.json    a TaskRecord (answered: verdict null; judged: verdict set)
    OUT/METHOD/runs/TASK_ID/   the method's own run folder
    OUT/judge-calls.jsonl      every judge call
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..files import write_atomic
from ..llm.types import Usage
from .judges import Verdict
from .tasks import safe_name

RECORD_VERSION = 1
MANIFEST = "eval.json"

ANSWERED = "answered"
CAPPED = "capped"
FAILED = "failed"


@dataclass(frozen=True)
class TaskRecord:
    """What happened to one task under one method. `verdict` is None until the answer is judged."""

    task_id: str
    benchmark: str
    method: str
    model: str | None
    status: str  # answered | capped | failed
    answer: str = ""
    error: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)
    task: str = ""
    gold: str = ""
    gold_lenient: str | None = None
    usage: Usage = Usage()
    by_stage: Mapping[str, Usage] = field(default_factory=dict)
    degraded: tuple[Mapping[str, Any], ...] = ()
    method_s: float = 0.0
    judge_s: float = 0.0
    run_dir: str = ""
    verdict: Verdict | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": RECORD_VERSION,
            "task_id": self.task_id,
            "benchmark": self.benchmark,
            "method": self.method,
            "model": self.model,
            "status": self.status,
            "answer": self.answer,
            "error": self.error,
            "meta": dict(self.meta),
            "task": self.task,
            "gold": self.gold,
            "gold_lenient": self.gold_lenient,
            "usage": self.usage.to_dict(),
            "by_stage": {stage: u.to_dict() for stage, u in self.by_stage.items()},
            "degraded": [dict(d) for d in self.degraded],
            "timing": {"method_s": round(self.method_s, 3), "judge_s": round(self.judge_s, 3)},
            "run_dir": self.run_dir,
            "verdict": self.verdict.to_dict() if self.verdict is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskRecord:
        timing = data.get("timing", {})
        verdict = data.get("verdict")
        return cls(
            task_id=str(data["task_id"]),
            benchmark=str(data["benchmark"]),
            method=str(data["method"]),
            model=data.get("model"),
            status=str(data["status"]),
            answer=str(data.get("answer", "")),
            error=str(data.get("error", "")),
            meta=dict(data.get("meta", {})),
            task=str(data.get("task", "")),
            gold=str(data.get("gold", "")),
            gold_lenient=data.get("gold_lenient"),
            usage=Usage.from_dict(data.get("usage", {})),
            by_stage={k: Usage.from_dict(v) for k, v in data.get("by_stage", {}).items()},
            degraded=tuple(data.get("degraded", ())),
            method_s=float(timing.get("method_s", 0.0)),
            judge_s=float(timing.get("judge_s", 0.0)),
            run_dir=str(data.get("run_dir", "")),
            verdict=Verdict.from_dict(verdict) if verdict is not None else None,
        )


def record_path(out_dir: Path, method: str, task_id: str) -> Path:
    return out_dir / safe_name(method) / f"{safe_name(task_id)}.json"


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically: a temporary file in the same folder, then os.replace."""
    write_atomic(path, json.dumps(data, ensure_ascii=False, indent=1) + "\n")


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc.msg}); delete it to redo that task") from exc


def write_record(out_dir: Path, record: TaskRecord) -> Path:
    path = record_path(out_dir, record.method, record.task_id)
    write_json(path, record.to_dict())
    return path


def read_record(path: Path) -> TaskRecord:
    data = read_json(path)
    try:
        return TaskRecord.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path} is not a task record ({exc}); delete it to redo that task") from exc
