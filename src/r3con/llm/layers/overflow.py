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
`Overflows` learns it from the reply: a run whose configured or discovered window was larger than
what the server gives one request (a guessed `--context-window`, a server that reports nothing)
re-plans its parts and notes for the stated window (`LearnedWindow.planning`). When the reply also
says how long the request was, the ratio of that to r3con's estimate of the same request scales the
window the parts are planned in, so parts planned with the estimate fit the server's own count. The
window keeps every request's reply budget inside it (`LearnedWindow.fit`, applied by `layers.Shaped`
before the request's fingerprint is taken): `max_tokens` is lowered to what the window leaves after
the (estimated) prompt, as vLLM refuses a request whose prompt and reply budget together exceed it.

A "too long" reply that states no number (Ollama's "input length exceeds the context length") teaches
that the window is below that request: the window is taken as half the request (prompt and reply
budget), never below `FLOOR_WINDOW`, so the parts are planned again at half their size, and again if
that is still too long, until they fit or the window reaches the floor (then the document is reported
degraded, as before).
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace

from ...errors import ContextTooLong
from ...tokens import MARGIN, estimate_tokens
from ..types import LLM, ChatRequest, Completion

FLOOR_WINDOW = 2048  # an unstated window is never taken below this (the least --context-window accepts)
MIN_REPLY = 64  # max_tokens is never lowered below this to fit the window (the server then says what is wrong)

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


def prompt_estimate(request: ChatRequest) -> int:
    """r3con's estimate of a request's prompt tokens (4 a message for the chat template's tags)."""
    return sum(estimate_tokens(m.content) + 4 for m in request.messages)


def _at_most(request: ChatRequest) -> int:
    """A bound on `prompt_estimate(request)` from the messages' lengths alone (no character is counted)."""
    return sum(int(len(m.content) * MARGIN) + 1 + 4 for m in request.messages)


class LearnedWindow:
    """The window one request may fill, as configured or discovered, then as the server's "too long"
    replies state it (thread-safe). `planning` is that window in r3con's estimated tokens."""

    def __init__(self, window: int):
        self.start = window
        self.stated = window
        self.scale = 1.0  # the server's tokens per estimated token, from replies that say both
        self.learned: list[dict[str, int]] = []  # each reply that taught something: window, request, estimate
        self.restored = 0  # of those, taken from an earlier run (the LLM cache's), not from this run's replies
        self._lock = threading.Lock()

    @property
    def planning(self) -> int:
        return int(self.stated / self.scale)

    def learn(self, limit: int, size: int | None, estimate: int) -> bool:
        """Take a stated `limit` (and the request's `size` in the server's tokens, if said); True when the
        planning window shrank."""
        with self._lock:
            before = self.planning
            self.stated = min(self.stated, limit)
            if size and estimate and size > estimate:
                self.scale = max(self.scale, size / estimate)
            if self.planning >= before:
                return False
            self.learned.append({"window": limit, "request_tokens": size or 0, "estimated_tokens": estimate})
            return True

    def restore(self, learned: object, *, restored: bool = False) -> None:
        """Take again what an earlier attempt of the run learned (its manifest's `learned_window`), or an earlier
        run against the endpoint (the LLM cache's: `restored`, said in `to_dict`), so that this one plans as that
        one ended, not by sending the requests that taught it again."""
        if not isinstance(learned, dict):
            return
        for entry in learned.get("learned_from") or ():
            if isinstance(entry, dict) and isinstance(entry.get("window"), int) and entry["window"] > 0:
                size, estimate = entry.get("request_tokens"), entry.get("estimated_tokens")
                if self.learn(entry["window"], size if isinstance(size, int) else None,
                              estimate if isinstance(estimate, int) else 0) and restored:
                    self.restored += 1

    def fit(self, request: ChatRequest) -> ChatRequest:
        """`request` with its reply budget lowered to what the planning window leaves after its (estimated)
        prompt, at least MIN_REPLY (vLLM refuses a request whose prompt and reply budget exceed the window)."""
        planning = self.planning
        # the estimate is at most a token a character (all of them CJK, with the margin): when even that
        # leaves room for the reply, the estimate cannot change the request and is not made
        if request.max_tokens is not None and request.max_tokens > planning - _at_most(request):
            estimate = prompt_estimate(request)
            if request.max_tokens > planning - estimate:
                return replace(request, max_tokens=max(MIN_REPLY, planning - estimate))
        return request

    def halve(self, request_tokens: int) -> bool:
        """Take the window as half a request of `request_tokens` estimated tokens that a reply without a number
        called too long (never below FLOOR_WINDOW); True when the planning window shrank."""
        with self._lock:
            before = self.planning
            self.stated = min(self.stated, max(FLOOR_WINDOW, min(self.stated, int(request_tokens * self.scale)) // 2))
            if self.planning >= before:
                return False
            self.learned.append({"window": self.stated, "request_tokens": 0, "estimated_tokens": request_tokens,
                                 "halved": 1})
            return True

    def to_dict(self) -> dict[str, object]:
        return {"window": self.stated, "planning_window": self.planning, "scale": round(self.scale, 3),
                "learned_from": list(self.learned), **({"from_earlier_runs": self.restored} if self.restored else {})}


class Overflows:
    """Learns the window from "too long" replies (`LearnedWindow`); `layers.Shaped` keeps each request's
    `max_tokens` inside what it learned."""

    def __init__(self, inner: LLM, window: LearnedWindow):
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
