"""Checks every reply before a stage sees it: cut at max_tokens, empty, only in reasoning_content, refused.

- cut (`finish_reason == "length"`): asked again with twice the reply budget, up to `max_tokens_cap`;
  without a budget to raise, asked again as it was; still cut after that: OutputError (the stage
  degrades the document).
- empty (no content, no reasoning): asked again, up to `reasks` times, then OutputError.
- only `reasoning_content` (Qwen thinking mode on vLLM): passed on; the stages read the reasoning.
- refused (`message.refusal`, or `finish_reason == "content_filter"`): OutputError, not asked again.

Each re-ask spends one retry of the run's budget. Every event is counted in the completion's usage
(`length`, `empty`, `reasoning_only`, `refusals`), and the usage of all attempts is summed so the
ledger bills the wasted ones too.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import OutputError, R3conError
from .replies import without_thinking
from .retry import RetryBudget
from .types import LLM, ChatRequest, Completion, Usage


def visible_text(completion: Completion) -> str:
    """The reply's content without thinking blocks."""
    return without_thinking(completion.content or "")


class OutputChecked:
    """Turns broken replies into bounded re-asks, then into OutputError; counts each event."""

    def __init__(self, inner: LLM, budget: RetryBudget, *, max_tokens_cap: int = 16_384, reasks: int = 2):
        self.inner = inner
        self.budget = budget
        self.max_tokens_cap = max_tokens_cap
        self.reasks = reasks

    async def complete(self, request: ChatRequest) -> Completion:
        total = Usage()
        current = request
        reasks = 0
        while True:
            try:
                completion = await self.inner.complete(current)
            except R3conError as exc:
                _attach(exc, total)
                raise
            total = total + completion.usage
            if completion.refusal or completion.finish_reason == "content_filter":
                total = total.with_event("refusals")
                raise _attach(OutputError(
                    f"the model refused to answer ({(completion.refusal or 'content filter')[:200]}); "
                    "rephrase the question or use another model"), total)
            if completion.finish_reason == "length":
                total = total.with_event("length")
                limit = current.max_tokens
                if limit is not None and limit < self.max_tokens_cap and self.budget.take():
                    current = replace(current, max_tokens=min(self.max_tokens_cap, limit * 2))
                    continue
                problem = f"the reply was cut at max_tokens={limit}" if limit else "the reply was cut short"
            elif not visible_text(completion) and not completion.tool_calls:
                if (completion.reasoning or "").strip():
                    return replace(completion, usage=total.with_event("reasoning_only"))
                total = total.with_event("empty")
                problem = "the reply was empty"
            else:
                return replace(completion, usage=total)
            if reasks < self.reasks and self.budget.take():
                reasks += 1
                continue
            raise _attach(OutputError(f"{problem} after {reasks + 1} attempts ({request.stage} stage); "
                                      "raise the stage's max tokens or try another model"), total)


def _attach(exc: R3conError, usage: Usage) -> R3conError:
    """Add `usage` (calls already made) to what the error carries, for the ledger."""
    before = exc.usage if isinstance(exc.usage, Usage) else Usage()
    exc.usage = before + usage
    return exc
