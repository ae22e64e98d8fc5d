"""Checks every reply before a stage sees it: cut at max_tokens, empty, only in reasoning_content, refused.

- cut (`finish_reason == "length"`): kept for what it holds, never asked again with a bigger budget
  (`cut.py`): a note up to its last complete sentence, marked "(cut)"; a JSON reply closed after the
  records it completed; a repetition loop stopped where it began. Nothing complete in it: asked once
  more at the same budget, then OutputError (the stage degrades the document). No request asks for
  more than `max_tokens_cap` reply tokens: `layers.Shaped` caps it before the request is fingerprinted.
- empty (no content, no reasoning): asked again, up to `reasks` times, then OutputError.
- only `reasoning_content` (Qwen thinking mode on vLLM): passed on; the stages read the reasoning.
- refused (`message.refusal`, or `finish_reason == "content_filter"`): OutputError, not asked again.

Each re-ask spends one retry of the run's budget. Every event is counted in the completion's usage
(`length`, `cut_kept`, `empty`, `reasoning_only`, `refusals`), and the usage of all attempts is summed so the
ledger bills the wasted ones too.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import OutputError, R3conError
from ..cut import keep_json, keep_text
from ..replies import without_thinking
from ..types import LLM, ChatRequest, Completion, Usage
from .retry import RetryBudget


def visible_text(completion: Completion) -> str:
    """The reply's content without thinking blocks."""
    return without_thinking(completion.content or "")


class OutputChecked:
    """Turns broken replies into bounded re-asks, then into OutputError; counts each event."""

    def __init__(self, inner: LLM, budget: RetryBudget, *, reasks: int = 2):
        self.inner = inner
        self.budget = budget
        self.reasks = reasks

    async def complete(self, request: ChatRequest) -> Completion:
        total = Usage()
        reasks = 0
        while True:
            try:
                completion = await self.inner.complete(request)
            except R3conError as exc:
                _attach(exc, total)
                raise
            total = total + completion.usage
            if completion.refusal or completion.finish_reason == "content_filter":
                total = total.with_event("refusals")
                raise OutputError(
                    f"the model refused to answer ({(completion.refusal or 'content filter')[:200]}); "
                    "rephrase the question or use another model", usage=total)
            if completion.finish_reason == "length":
                total = total.with_event("length")
                text = visible_text(completion)
                kept = keep_json(text) if request.response_schema is not None else keep_text(text)
                if kept is not None:
                    return replace(completion, content=kept, usage=total.with_event("cut_kept"))
                if not text and (completion.reasoning or "").strip():
                    return replace(completion, usage=total.with_event("reasoning_only"))
                problem = f"the reply was cut at max_tokens={request.max_tokens} with nothing complete in it"
                if reasks < 1 and self.budget.take():  # once more at the same budget, never a bigger one
                    reasks += 1
                    continue
                raise OutputError(
                    f"{problem} ({request.stage} stage); raise the stage's max tokens (at most "
                    "R3CON_MAX_TOKENS_CAP) or try another model", usage=total)
            elif not visible_text(completion) and not completion.tool_calls:
                if (completion.reasoning or "").strip():
                    return replace(completion, usage=total.with_event("reasoning_only"))
                total = total.with_event("empty")
                problem = "the reply was empty"
            elif reasks == 0:  # the first reply, as it came (`total` is its usage alone)
                return completion
            else:
                return replace(completion, usage=total)
            if reasks < self.reasks and self.budget.take():
                reasks += 1
                continue
            raise OutputError(f"{problem} after {reasks + 1} attempts ({request.stage} stage); "
                              "raise the stage's max tokens or try another model", usage=total)


def _attach(exc: R3conError, usage: Usage) -> R3conError:
    """Add `usage` (re-asks already made) to what an endpoint error passing through carries, for the ledger
    (the one attribute set on a caught exception: copying it would change what callers catch)."""
    before = exc.usage if isinstance(exc.usage, Usage) else Usage()
    exc.usage = before + usage
    return exc
