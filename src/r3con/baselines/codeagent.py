"""codeagent: a coding agent over the raw documents, with no representation built first.

As the paper ran smolagents' `CodeAgent` (Roucher et al., 2025): a ReAct-style loop in which each
step is a thought and one Python block, run in a persistent REPL where `documents` (number, title,
full text of each document) is bound; the printed output is the next observation, and
`final_answer(value)` ends the run. After `max_steps` steps, one last call asks for a plain answer
(the run is then marked step-capped). It is R3CON's answer stage (`run_agent`) over the raw texts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..corpus.documents import Document
from ..prompts.render import render
from ..results import MethodFn, MethodOutcome
from ..stages.answer import run_agent
from ..tokens import estimate_tokens
from ._agent import agent_options, sandbox_for
from ._common import check_options, describe, method_run

NAME = "codeagent"
DESCRIPTION = "a smolagents-style coding agent over the raw documents bound as `documents` (max 20 steps)"
STAGE = "codeagent"


@dataclass(frozen=True)
class Options:
    """Parameters of the code-agent baseline.

    max_steps: code steps before the forced final answer (smolagents' `max_steps`, 20 by default).
    max_tokens: output budget of each step.
    overview_docs: how many documents the first message lists by number, title and size.
    """

    max_steps: int = 20
    max_tokens: int = 4096
    overview_docs: int = 200


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr:
            answer_options = agent_options(mr, options.max_steps, options.max_tokens)
            overview = "\n".join(f"- {d.number}: {d.title} (about {estimate_tokens(d.text)} tokens)"
                                 for d in documents[:options.overview_docs])
            if len(documents) > options.overview_docs:
                overview += f"\n- ... and {len(documents) - options.overview_docs} more"
            system = render("codeagent_system", max_steps=options.max_steps)
            first = render("codeagent_task", task=task, count=len(documents),
                           total_chars=sum(len(d.text) for d in documents), overview=overview)
            sandbox = sandbox_for(answer_options, {"documents": describe(documents)})
            result = await run_agent(mr.llm, system, first, sandbox, answer_options, stage=STAGE)
            mr.log.update(isolation=result.isolation, steps=[s.to_dict() for s in result.steps])
            return mr.finish(result.answer, capped=result.capped)

    return run
