"""Fakes for the eval tests: a scripted LLM that implements the seam, a scripted method, data lookup."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from r3con.corpus import Document, documents_from_texts
from r3con.errors import R3conError
from r3con.eval.tasks import EvalTask
from r3con.llm.types import ChatRequest, Completion, Usage

from ..fakes import benchmark_data

REPO = Path(__file__).resolve().parents[2]
TINY_CORPUSQA = Path(__file__).parent / "data" / "corpusqa_tiny.jsonl"
JUDGE_USAGE = Usage(calls=1, prompt_tokens=100, completion_tokens=20, cost_usd=0.001)


def shared_data(benchmark: str) -> Path:
    """The benchmark's data: the real folder when it is here, else the committed slice (tests/fixtures/data)."""
    return benchmark_data(benchmark)


Reply = str | R3conError | Callable[[ChatRequest], str]


class ScriptedLLM:
    """Answers each request with the next scripted reply (text, an error to raise, or a function of the request).

    When the script runs out, `default` answers. Every request is kept in `requests`.
    """

    def __init__(self, *replies: Reply, default: Reply | None = None, model: str = "judge-model"):
        self.replies = list(replies)
        self.default = default
        self.model = model
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        if self.replies:
            reply = self.replies.pop(0)
        elif self.default is not None:
            reply = self.default
        else:
            raise AssertionError(f"unexpected LLM call: {request.messages[-1].content[:200]!r}")
        if isinstance(reply, R3conError):
            raise reply
        content = reply(request) if callable(reply) else reply
        return Completion(content=content, finish_reason="stop", usage=JUDGE_USAGE, model=self.model)


@dataclass(frozen=True)
class FakeOutcome:
    """Shaped like r3con.methods.MethodOutcome (the runner reads only these attributes)."""

    answer: str
    usage: Usage
    by_stage: Mapping[str, Usage]
    capped: bool
    degraded: tuple[object, ...]
    run_dir: Path


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
                       run_dir: Path) -> FakeOutcome:
        self.calls.append((name, task))
        if task in self.errors:
            raise self.errors[task]
        run_dir.mkdir(parents=True, exist_ok=True)
        usage = self.usage
        return FakeOutcome(
            answer=self.answers.get(task, self.default), usage=usage, by_stage={"reason": usage},
            capped=task in self.capped, degraded=(), run_dir=run_dir,
        )


def make_task(task_id: str, text: str, gold: str, benchmark: str = "loong", **meta: object) -> EvalTask:
    return EvalTask(
        id=task_id, benchmark=benchmark, task_text=text,
        documents=documents_from_texts([("Doc A", "alpha text"), ("Doc B", "beta text")]),
        gold=gold, meta=meta,
    )
