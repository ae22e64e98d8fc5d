"""Shared by the baseline tests: a small Loong slice and Dracula, a runner, and checks every method must pass."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from r3con.config import Settings
from r3con.eval.dracula import load_dracula
from r3con.eval.loong import load_loong
from r3con.eval.tasks import EvalTask, TaskFilter
from r3con.methods import MethodFn, MethodOutcome
from r3con.testing import FakeLLMServer

from ..eval._fakes import shared_data

CORPORA = ("loong-en", "loong-zh", "dracula")


@cache
def _task(name: str) -> EvalTask:
    if name == "dracula":
        return load_dracula(shared_data("dracula")).tasks[0]
    language = name.split("-")[1]
    domain = "paper" if language == "en" else "financial"
    filters = TaskFilter(sets=(1,), domains=(domain,), languages=(language,), limit=1)
    return load_loong(shared_data("loong"), filters).tasks[0]


def task(name: str) -> EvalTask:
    """A real task: 'loong-en' (3 papers, ~38k tokens), 'loong-zh' (2 Chinese reports, ~16k), 'dracula' (46 docs)."""
    shared_data(name.split("-")[0])  # skips when the data is absent
    return _task(name)


_TASKS: dict[Path, EvalTask] = {}  # the task each outcome of `run` answered, for `check_outcome`


async def run(method: MethodFn, eval_task: EvalTask, server: FakeLLMServer, out: Path, **settings: Any) -> MethodOutcome:
    # the tests read the prompts each method sent from calls.jsonl, so it keeps every request
    resolved = Settings.resolve(env={}, base_url=server.base_url, **{"log_calls": "full", **settings})
    outcome = await method(eval_task.task_text, eval_task.documents, resolved, out)
    _TASKS[outcome.run_dir] = eval_task
    return outcome


def grounded(answer: str, eval_task: EvalTask) -> list[str]:
    """What the answer takes from the documents: names (capitalised words past the first), CJK pairs, or runs
    of five words the documents hold; a stock reply ("no evidence found", "3 documents") has none."""
    corpus = " ".join(" ".join(f"{d.title} {d.text}".split()) for d in eval_task.documents)
    words = answer.split()
    found = [w.strip(".,;:()") for w in words[1:] if re.fullmatch(r"[A-Z][a-z'-]{3,}[.,;:)]*", w)]
    found += [run[i:i + 2] for run in re.findall(r"[\u4e00-\u9fff]{2,}", answer) for i in range(len(run) - 1)]
    found += [" ".join(words[i:i + 5]) for i in range(len(words) - 4)]
    return [x for x in found if x and x in corpus]


def server_stages(server: FakeLLMServer, path: str = "/v1/chat/completions") -> list[str]:
    return [c["stage"] for c in server.calls() if c.get("path", "").rstrip("/") == path]


def transcript(outcome: MethodOutcome) -> dict[str, Any]:
    return json.loads((outcome.run_dir / "transcript.json").read_text())


def logged_calls(outcome: MethodOutcome) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (outcome.run_dir / "calls.jsonl").read_text().splitlines()]


def check_outcome(outcome: MethodOutcome, server: FakeLLMServer, stages: Iterable[str],
                  required: Iterable[str] | None = None) -> None:
    """A non-empty answer, every call under the method's own stages, usage per stage, and the artifacts."""
    stages = set(stages)
    assert outcome.answer.strip()
    eval_task = _TASKS.get(outcome.run_dir)
    if eval_task is not None:
        assert grounded(outcome.answer, eval_task), f"nothing of the documents in the answer: {outcome.answer[:200]!r}"
    seen = server_stages(server)
    assert seen and set(seen) <= stages, set(seen) - stages
    assert set(required if required is not None else stages) <= set(seen)
    assert set(outcome.by_stage) <= stages | {s for s in outcome.by_stage if s.endswith("-embed")}
    for stage in set(seen):
        usage = outcome.by_stage[stage]
        assert usage.calls == seen.count(stage) and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert outcome.usage.calls == sum(u.calls for u in outcome.by_stage.values())
    for name in ("answer.txt", "usage.json", "transcript.json", "result.json", "manifest.json", "calls.jsonl"):
        assert (outcome.run_dir / name).is_file(), name
    assert (outcome.run_dir / "answer.txt").read_text().strip() == outcome.answer.strip()
    usage = json.loads((outcome.run_dir / "usage.json").read_text())
    assert usage["calls"] == outcome.usage.calls and set(usage["by_stage"]) == set(outcome.by_stage)
