"""Recognise a server's "the request is longer than the context window" reply, whichever server sent it.

The stages split a document or give fewer notes on `ContextTooLong`, instead of counting a failure,
so each common server's own words must be recognised (they differ, and some send HTTP 500):

- OpenAI: code `context_length_exceeded`, "This model's maximum context length is N tokens ..."
- vLLM: "This model's maximum context length is N tokens. However, you requested M tokens ...",
  "'max_tokens' or 'max_completion_tokens' is too large: ...", "The prompt (total length N) is too
  long to fit into the model (context length M)", "... is longer than the maximum model length of N"
- llama.cpp: "request (12062 tokens) exceeds the available context size (8192 tokens)", type
  `exceed_context_size_error`
- SGLang: "The input (61709 tokens) is longer than the model's context length (40960 tokens).",
  "Input length (N tokens) exceeds the maximum allowed length (M tokens)."
- Ollama: "input length exceeds the context length" (it truncates silently unless told not to)
- Anthropic-style proxies: "prompt is too long: N tokens > M maximum"

Most of them also say the window (llama.cpp: "exceeds the available context size (2048 tokens)").
`Overflows` tells the window (`r3con.llm.window.Window`, its one owner) what each such reply stated: the
window, and the request's size when said; or, when no number is said, that the request was over it.
"""

from __future__ import annotations

import re

from ...errors import ContextTooLong
from ..types import LLM, ChatRequest, Completion
from ..window import Window, prompt_estimate

_OVERFLOW = re.compile(
    r"context_length_exceeded|exceed_context_size|maximum context length|context length (?:is|of|exceeded)"
    r"|exceeds? the (?:available |maximum )?context (?:size|length|window)|longer than the model'?s context length"
    r"|longer than the maximum model length|too long to fit into the model|exceeds the maximum allowed length"
    r"|input length exceeds|prompt is too long|maximum input length|context window (?:is )?(?:full|exceeded)"
    r"|'max_tokens' or 'max_completion_tokens' is too large|input tokens exceed the configured limit",
    re.IGNORECASE,
)


def is_overflow(text: str) -> bool:
    """Whether an error reply's message or body says the request does not fit the model's window."""
    return bool(_OVERFLOW.search(text or ""))


_LIMIT = (  # the window a server states in its "too long" reply (the first group), and the request's size (second)
    re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)", re.I),  # llama.cpp
    re.compile(r"maximum context length is (\d+) tokens", re.I),  # OpenAI, vLLM (its "requested" counts the reply)
    re.compile(r"total length (\d+)\) is too long to fit into the model \(context length (\d+)\)", re.I),
    re.compile(r"input \((\d+) tokens\) is longer than the model'?s context length \((\d+) tokens\)", re.I),
    re.compile(r"input length \((\d+) tokens\) exceeds the maximum allowed length \((\d+) tokens\)", re.I),
    re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum", re.I),
    re.compile(r"longer than the maximum model length of (\d+)", re.I),
)
_SIZE_FIRST = frozenset({0, 2, 3, 4, 5})  # the patterns above that name the request's size before the window


def stated_limit(text: str) -> tuple[int, int | None] | None:
    """(the window, the request's size in tokens if said) from a "too long" reply; None when it states no number."""
    for i, pattern in enumerate(_LIMIT):
        match = pattern.search(text or "")
        if match is None:
            continue
        numbers = [int(g) for g in match.groups()]
        size, limit = (numbers[0], numbers[1]) if i in _SIZE_FIRST else (None, numbers[0])
        if limit > 0:
            return limit, size
    return None


class Overflows:
    """Tells the window what "too long" replies state (`Window.learn`, `Window.halve`); `layers.Shaped` keeps
    each request's `max_tokens` inside what it learned."""

    def __init__(self, inner: LLM, window: Window):
        self.inner = inner
        self.window = window

    async def complete(self, request: ChatRequest) -> Completion:
        try:
            return await self.inner.complete(request)
        except ContextTooLong as exc:
            stated = stated_limit(f"{exc} {exc.body}")
            estimate = prompt_estimate(request)
            if stated is not None:
                self.window.learn(stated[0], stated[1], estimate)
            else:  # no number said: half the request's size, until it fits or reaches the floor
                self.window.halve(estimate + (request.max_tokens or 0))
            raise
