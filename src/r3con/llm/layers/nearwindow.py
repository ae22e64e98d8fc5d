"""A warning when prompts come close to a window the server was not asked for (a default, a guess).

Ollama cuts a prompt longer than the context it runs with silently, and some servers report no window;
then r3con plans within an assumed one. A prompt within 10% of it may have been cut: say so.
"""

from __future__ import annotations

from ..discovery.served import EndpointInfo
from ..types import LLM, ChatRequest, Completion, Usage
from .accounting import Ledger

NEAR = 0.9  # a prompt this share of the window or more counts as close to it


def window_was_asked(source: str) -> bool:
    """Whether the window came from configuration or from the server's own report of what it serves."""
    guessed = ("default" in source or "n_ctx_train" in source or "max_context_length" in source)
    return source == "config" or (source.startswith("server") and not guessed)


class NearWindow:
    """Counts calls whose prompt came within 10% of an unasked window (`near_window`); `warning()` says so."""

    def __init__(self, inner: LLM, ledger: Ledger, endpoint: EndpointInfo):
        self.inner, self.ledger, self.endpoint = inner, ledger, endpoint
        self.near = 0
        self.largest = 0

    async def complete(self, request: ChatRequest) -> Completion:
        completion = await self.inner.complete(request)
        prompt = completion.usage.prompt_tokens
        self.largest = max(self.largest, prompt)
        if prompt >= NEAR * self.endpoint.context_window:
            self.near += 1
            self.ledger.add(request.stage, Usage(events={"near_window": 1}))
        return completion

    def warning(self) -> str | None:
        """One line when prompts came close to the window, else None."""
        if not self.near:
            return None
        e = self.endpoint
        return (f"{self.near} prompt(s) reached 90% or more of the {e.context_window:,}-token window of {e.model} "
                f"(up to {self.largest:,} tokens), a window the server did not report ({e.context_window_source}); "
                "if it cuts long prompts silently, answers may miss text: pass --context-window with the "
                "window it really serves, or raise it")
