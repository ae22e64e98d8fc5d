"""The request as it will be sent: the stage's model, the reply cap, the window."""

from __future__ import annotations

from collections.abc import Callable

from ..types import LLM, ChatRequest, Completion, evolve
from ..window import Window


class Shaped:
    """Makes each request what will be sent, before anything takes its fingerprint: the stage's model (a small
    one for relevance, a large one to reason...), a reply budget no larger than `max_tokens_cap` (a request
    that names none gets the cap), and no larger than what the window (as "too long" replies taught it,
    `window.Window`) leaves after the prompt. Every layer below sends the request as it leaves here,
    so the cache, the reuse record and resume key on what the endpoint is asked."""

    def __init__(self, inner: LLM, model_for: Callable[[str], str | None], default: str, *,
                 max_tokens_cap: int | None = None, window: Window | None = None):
        self.inner = inner
        self._model_for = model_for
        self._default = default
        self.max_tokens_cap = max_tokens_cap
        self.window = window

    def shape(self, request: ChatRequest) -> ChatRequest:
        """`request` as it will be sent."""
        if request.model is None:
            request = request.with_model(self._model_for(request.stage) or self._default)
        cap = self.max_tokens_cap
        if cap is not None and (request.max_tokens is None or request.max_tokens > cap):
            request = evolve(request, max_tokens=cap)
        if self.window is not None:
            request = self.window.fit(request)
        return request

    async def complete(self, request: ChatRequest) -> Completion:
        return await self.inner.complete(self.shape(request))
