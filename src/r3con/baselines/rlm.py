"""rlm: a recursive language model, the documents a variable in a REPL whose code can call the model.

After Zhang, Kraska and Khattab (2025, "Recursive Language Models"): the root model never sees the
documents in its prompt; they are the REPL variable `context` (a list of {number, title, text}),
and its code may call a sub-model on slices with `llm_query(prompt)` or, many at once,
`llm_query_batched(prompts)`. Depth 1, as in the paper's experiments: sub-calls are plain
completions (stage `rlm-sub`) that cannot recurse. At most `max_iterations` root turns; the paper's
`FINAL(...)`/`FINAL_VAR(...)` are `final_answer(value)` here, as in the other agents. A sub-prompt too
long for the window, or a call past `max_sub_calls`, raises in the code (the model sees the error).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Settings
from ..corpus.documents import Document
from ..prompts.render import Rendered, render
from ..results import MethodFn, MethodOutcome
from ..stages.answer import run_agent
from ..tokens import estimate_tokens
from ._agent import agent_options, sandbox_for
from ._common import MethodRun, check_options, describe, method_run

NAME = "rlm"
DESCRIPTION = "recursive LM: documents as the REPL variable `context`, code calls llm_query on slices (depth 1, 30 turns)"
STAGE = "rlm"
SUB_STAGE = "rlm-sub"


@dataclass(frozen=True)
class Options:
    """Parameters of the recursive-language-model baseline.

    max_iterations: root turns (one code block each) before the forced final answer (30).
    max_tokens: output budget of each root turn.
    sub_max_tokens: output budget of each `llm_query` sub-call.
    max_sub_calls: sub-calls allowed over the whole run (a guard on cost).
    """

    max_iterations: int = 30
    max_tokens: int = 4096
    sub_max_tokens: int = 2048
    max_sub_calls: int = 200


class _SubModel:
    """`llm_query` and `llm_query_batched` for the sandbox: depth-1 completions, counted and bounded."""

    def __init__(self, mr: MethodRun, options: Options):
        self.mr = mr
        self.options = options
        self.limit = max(256, mr.window - options.sub_max_tokens - 64)
        self.calls: list[dict[str, Any]] = []

    async def query(self, prompt: Any) -> str:
        if not isinstance(prompt, str):
            raise TypeError("llm_query takes one string: the prompt")
        tokens = estimate_tokens(prompt)
        if tokens > self.limit:
            raise ValueError(f"the prompt has about {tokens} tokens; the sub-LLM takes at most {self.limit}: "
                             "pass a smaller slice of the context")
        if len(self.calls) >= self.options.max_sub_calls:
            raise RuntimeError(f"the limit of {self.options.max_sub_calls} sub-LLM calls is reached; answer now")
        entry: dict[str, Any] = {"prompt_chars": len(prompt)}
        self.calls.append(entry)
        rendered = Rendered(text=prompt, name="rlm-sub", hash=hashlib.sha256(prompt.encode()).hexdigest()[:12])
        reply = await self.mr.ask(SUB_STAGE, rendered, max_tokens=self.options.sub_max_tokens)
        entry["reply_chars"] = len(reply)
        return reply

    async def batched(self, prompts: Any) -> list[str]:
        if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
            raise TypeError("llm_query_batched takes a list of strings")
        return list(await asyncio.gather(*(self.query(p) for p in prompts)))


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr:
            answer_options = agent_options(mr, options.max_iterations, options.max_tokens)
            sub = _SubModel(mr, options)
            system = render("rlm_system", sub_chars=f"{sub.limit * 3:,}", max_sub_calls=options.max_sub_calls,
                            max_iterations=options.max_iterations)
            lengths = ", ".join(str(len(d.text)) for d in documents[:100])
            if len(documents) > 100:
                lengths += ", ..."
            first = render("rlm_task", task=task, count=len(documents),
                           total_chars=sum(len(d.text) for d in documents), lengths=lengths)
            sandbox = sandbox_for(answer_options, {"context": describe(documents)},
                                  {"llm_query": sub.query, "llm_query_batched": sub.batched})
            result = await run_agent(mr.llm, system, first, sandbox, answer_options, stage=STAGE)
            mr.log.update(isolation=result.isolation, steps=[s.to_dict() for s in result.steps],
                          sub_calls=len(sub.calls))
            return mr.finish(result.answer, capped=result.capped)

    return run
