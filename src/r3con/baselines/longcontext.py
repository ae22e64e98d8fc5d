"""long-context: every document in one prompt, up to the model's window, then one answer.

The baseline of Loong (Wang et al., 2024, "Leave No Document Behind") and of most long-context
evaluations: the model reads the whole collection at once. When the documents do not fit, they are
cut by a documented policy (`truncation`) and the prompt says which were cut:

- `fair` (default): every document keeps its beginning; shorter documents stay whole and the longer
  ones are all cut to the same cap, so no document is dropped (water-filling over the window).
- `head`: documents in corpus order while they fit; the first that does not is cut, the rest are
  dropped (what "truncate the concatenation" does).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..config import Settings
from ..corpus.documents import Document
from ..errors import ConfigError
from ..llm.replies import final_answer_line
from ..prompts.render import render
from ..results import MethodFn, MethodOutcome
from ._common import budget_for, check_options, fit_documents, method_run

NAME = "longcontext"
DESCRIPTION = "all documents in one prompt up to the context window (fair truncation), one answer"
STAGE = "longcontext"


@dataclass(frozen=True)
class Options:
    """Parameters of the long-context baseline.

    max_tokens: the answer's output budget, reserved in the window.
    truncation: `fair` or `head` (see the module docstring).
    """

    max_tokens: int = 4096
    truncation: Literal["fair", "head"] = "fair"


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)
    if options.truncation not in ("fair", "head"):
        raise ConfigError(f"longcontext.Options.truncation must be 'fair' or 'head', not {options.truncation!r}")

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr:
            budget = budget_for(mr.window, options.max_tokens, len(task) // 3, 30 * len(documents))
            kept, report = fit_documents(documents, budget, options.truncation)
            truncated = ", ".join(f"Document {r['doc']}" for r in report if r["truncated"])
            prompt = render("longcontext", documents=kept, task=task, truncated=truncated)
            mr.log.update(budget_tokens=budget, truncation=options.truncation, documents=report)
            reply = await mr.ask(STAGE, prompt, max_tokens=options.max_tokens)
            mr.log["reply"] = reply
            return mr.finish(final_answer_line(reply))

    return run
