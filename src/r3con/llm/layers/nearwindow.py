"""A warning when prompts come close to a window the server was not asked for (a default, a guess).

Ollama cuts a prompt longer than the context it runs with silently, and some servers report no window;
then r3con plans within an assumed one. A prompt within 10% of it may have been cut: say so.
"""

from __future__ import annotations

from ..types import LLM, ChatRequest, Completion, Usage
from ..window import Window
from .accounting import Ledger

NEAR = 0.9  # a prompt this share of the window or more counts as close to it


class NearWindow:
    """Counts calls whose prompt came within 10% of an unasked window (`near_window`, `Window.asked`);
    `warning()` says so."""

    def __init__(self, inner: LLM, ledger: Ledger, window: Window):
        self.inner, self.ledger, self.window = inner, ledger, window
        self.near = 0
        self.largest = 0

    async def complete(self, request: ChatRequest) -> Completion:
        completion = await self.inner.complete(request)
        prompt = completion.usage.prompt_tokens
        self.largest = max(self.largest, prompt)
        if prompt >= NEAR * self.window.reported:
            self.near += 1
            self.ledger.add(request.stage, Usage(events={"near_window": 1}))
        return completion

    def warning(self) -> str | None:
        """One line when prompts came close to the window, else None."""
        if not self.near:
            return None
        w = self.window
        return (f"{self.near} prompt(s) reached 90% or more of the {w.reported:,}-token window of {w.endpoint.model} "
                f"(up to {self.largest:,} tokens), a window the server did not report ({w.source}); "
                "if it cuts long prompts silently, answers may miss text: pass --context-window with the "
                "window it really serves, or raise it")
