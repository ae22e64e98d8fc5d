"""A scripted LLM that implements the real seam and records what it was sent."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest

from r3con.llm import Ledger, LLMStack
from r3con.llm.discovery.served import EndpointInfo
from r3con.llm.layers.accounting import Accounted
from r3con.llm.pricing import PriceTable
from r3con.llm.types import ChatRequest, Completion, Usage
from r3con.notes.selection import NotesSelector

Reply = str | Completion | BaseException | Callable[[ChatRequest], str]


class ScriptedLLM:
    """The one fake LLM of the unit tests: it implements the seam and keeps every request in `history`.

    A request is answered by the next of `replies` while any are left, else by its stage's handler in
    `handlers`, else by `default`. A reply is text, a Completion (returned as it is), an error (raised)
    or a function of the request giving text. Usage is `usage` when given, else counted from the text.
    """

    def __init__(self, handlers: Mapping[str, Reply] | None = None, default: Reply | None = None, *,
                 replies: Iterable[Reply] = (), model: str = "scripted", usage: Usage | None = None):
        self.handlers = dict(handlers or {})
        self.default = default
        self.replies = list(replies)
        self.model = model
        self.usage = usage
        self.history: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.history.append(request)
        reply = self.replies.pop(0) if self.replies else self.handlers.get(request.stage, self.default)
        if reply is None:
            raise AssertionError(f"no scripted answer for stage {request.stage}: {user_text(request)[:200]!r}")
        if callable(reply) and not isinstance(reply, type):
            reply = reply(request)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, Completion):
            return reply
        tokens = sum(len(m.content) for m in request.messages) // 4
        usage = self.usage or Usage(calls=1, prompt_tokens=tokens, completion_tokens=len(reply) // 4)
        return Completion(content=reply, finish_reason="stop", model=request.model or self.model, usage=usage)

    def calls(self, stage: str) -> list[ChatRequest]:
        return [r for r in self.history if r.stage == stage]


def stack(llm: ScriptedLLM, context_window: int = 32768) -> LLMStack:
    """The scripted LLM with accounting, shaped like the stack `build_llm` yields."""
    ledger = Ledger()
    return LLMStack(top=Accounted(llm, ledger, PriceTable.load()), ledger=ledger,
                    endpoint=EndpointInfo("scripted://", "scripted", context_window, "config"))


def user_text(request: ChatRequest) -> str:
    return "\n".join(m.content for m in request.messages if m.role == "user")


def document_number(request: ChatRequest) -> int:
    match = re.search(r'<document number="(\d+)"', user_text(request))
    if not match:
        raise AssertionError("no document in the request")
    return int(match.group(1))


def quote(request: ChatRequest) -> str:
    """The first sentence of the request's document: a verbatim passage a record can carry as `_passage`."""
    match = re.search(r'<document number="[^"]*"[^>]*>\n(.*?)\n</document>', user_text(request), flags=re.DOTALL)
    if not match:
        raise AssertionError("no document in the request")
    return re.split(r"(?<=[.!?])\s", match.group(1).strip())[0]


SIMPLE_SCHEMA = {
    "type": "object",
    "properties": {
        "people": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": ["integer", "null"]}},
                "required": ["name"],
            },
        }
    },
}


def schema_reply(schema: dict | None = None) -> str:
    return "```json\n" + json.dumps(schema or SIMPLE_SCHEMA) + "\n```"


FIXTURE_DATA = Path(__file__).parent / "fixtures" / "data"


def data_dir() -> Path:
    """Where the real benchmark data lives: R3CON_DATA, else ../shared/data beside the repository."""
    return Path(os.environ.get("R3CON_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def benchmark_data(name: str) -> Path:
    """A benchmark's real data folder when it is here, else the small committed slice of it."""
    real = data_dir() / name
    return real if real.is_dir() else FIXTURE_DATA / name


def real_data(name: str) -> Path:
    """A benchmark's real data folder (the whole corpus), or skip the test saying where it was looked for."""
    path = data_dir() / name
    if not path.is_dir():
        pytest.skip(f"real {name} data not found at {path} (set R3CON_DATA to the folder holding {name}/)")
    return path


class SelectsElsewhere:
    """`notes.Selects` as a Ray worker answers it: a selector of its own over the notes it was sent; `made`
    counts the choices."""

    def __init__(self):
        self.made = 0

    async def select_many(self, refs, budget, queries, each=None):
        selector = NotesSelector(refs, budget)
        self.made += len(queries)
        made = [await selector.answer(q, budget) for q in queries[:]]
        if each is None:
            return made
        for i in reversed(range(len(made))):  # handed over out of order, as a cluster's batches come back
            each(i, made[i])
        return []
