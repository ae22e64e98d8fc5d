"""Fakes for the eval tests: a scripted LLM that implements the seam, a scripted method, data lookup."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from r3con.corpus.documents import Document, documents_from_texts
from r3con.errors import R3conError
from r3con.eval.tasks import EvalTask
from r3con.llm.types import Usage
from r3con.results import MethodOutcome

from ..fakes import Reply, ScriptedLLM, benchmark_data

REPO = Path(__file__).resolve().parents[2]
TINY_CORPUSQA = Path(__file__).parent / "data" / "corpusqa_tiny.jsonl"
JUDGE_USAGE = Usage(calls=1, prompt_tokens=100, completion_tokens=20, cost_usd=0.001)


def shared_data(benchmark: str) -> Path:
    """The benchmark's data: the real folder when it is here, else the committed slice (tests/fixtures/data)."""
    return benchmark_data(benchmark)


def judge_llm(*replies: Reply, default: Reply | None = None) -> ScriptedLLM:
    """The scripted LLM as a judge: `replies` in turn, then `default`; every call costs `JUDGE_USAGE`."""
    return ScriptedLLM(default=default, replies=replies, model="judge-model", usage=JUDGE_USAGE)


@dataclass
class FakeMethod:
    """A method that answers from a table by task text; records every call."""

    answers: Mapping[str, str] = field(default_factory=dict)
    default: str = "an answer"
    capped: set[str] = field(default_factory=set)
    errors: Mapping[str, R3conError] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    usage: Usage = Usage(calls=3, prompt_tokens=1000, completion_tokens=100, cost_usd=0.01)

    async def __call__(self, name: str, task: str, documents: tuple[Document, ...], settings: object,
                       run_dir: Path) -> MethodOutcome:
        self.calls.append((name, task))
        if task in self.errors:
            raise self.errors[task]
        run_dir.mkdir(parents=True, exist_ok=True)
        usage = self.usage
        return MethodOutcome(
            answer=self.answers.get(task, self.default), usage=usage, by_stage={"reason": usage},
            capped=task in self.capped, degraded=(), run_dir=run_dir,
        )


def make_task(task_id: str, text: str, gold: str, benchmark: str = "loong", **meta: object) -> EvalTask:
    return EvalTask(
        id=task_id, benchmark=benchmark, task_text=text,
        documents=documents_from_texts([("Doc A", "alpha text"), ("Doc B", "beta text")]),
        gold=gold, meta=meta,
    )
