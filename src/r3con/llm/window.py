"""The window one request may fill: the one owner of what it is, which everything else asks.

- **configured or reported**: `--context-window`, else what the server reports of it (`discovery.served`
  reads each server's own way of saying it, into `EndpointInfo`); `asked` says whether the server was asked
  what it serves (a default or a trained context is a guess, `layers.nearwindow` warns near it);
- **learned**: a server's "too long" reply (`layers.overflow` recognises it) states the window, or that the
  request was over it; `planning` is then the window the parts and notes are planned in, in r3con's estimated
  tokens, and `fit` keeps each request's reply budget inside it (`layers.Shaped`);
- **kept**: what a run learned goes to the LLM cache at its end (`keep`), so that the next run against the
  endpoint and model plans in it from the start (`recall`); a resumed run takes what its attempts before
  learned from its manifest (`restore`).

When a "too long" reply also says how long the request was, the ratio of that to r3con's estimate of the same
request scales the planning window, so parts planned with the estimate fit the server's own count. A reply
that states no number (Ollama's "input length exceeds the context length") teaches that the window is below
that request: it is taken as half the request (prompt and reply budget), never below `FLOOR_WINDOW`, so the
parts are planned again at half their size, and again if that is still too long, until they fit or the
window reaches the floor (then the document is reported degraded).
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING

from ..tokens import MARGIN, estimate_tokens
from .discovery.served import EndpointInfo
from .types import ChatRequest

if TYPE_CHECKING:
    from .cache import CallCache

FLOOR_WINDOW = 2048  # an unstated window is never taken below this (the least --context-window accepts)
MIN_REPLY = 64  # max_tokens is never lowered below this to fit the window (the server then says what is wrong)


def was_asked(source: str) -> bool:
    """Whether a window came from configuration or from the server's own report of what it serves."""
    guessed = ("default" in source or "n_ctx_train" in source or "max_context_length" in source)
    return source == "config" or (source.startswith("server") and not guessed)


def prompt_estimate(request: ChatRequest) -> int:
    """r3con's estimate of a request's prompt tokens (4 a message for the chat template's tags)."""
    return sum(estimate_tokens(m.content) + 4 for m in request.messages)


def _at_most(request: ChatRequest) -> int:
    """A bound on `prompt_estimate(request)` from the messages' lengths alone (no character is counted)."""
    return sum(int(len(m.content) * MARGIN) + 1 + 4 for m in request.messages)


class Window:
    """The window of one endpoint and model, as configured or reported, then as the server's "too long"
    replies state it (thread-safe). See the module's docstring."""

    def __init__(self, endpoint: EndpointInfo):
        self.endpoint = endpoint
        self.stated = endpoint.context_window
        self.scale = 1.0  # the server's tokens per estimated token, from replies that say both
        self.learned: list[dict[str, int]] = []  # each reply that taught something: window, request, estimate
        self.restored = 0  # of those, taken from an earlier run (the LLM cache's), not from this run's replies
        self._lock = threading.Lock()

    @classmethod
    def of(cls, tokens: int) -> Window:
        """A configured window of `tokens`, for an endpoint that is not named."""
        return cls(EndpointInfo("", "", tokens, "config"))

    @property
    def reported(self) -> int:
        """The window as configured or reported, before any reply taught otherwise."""
        return self.endpoint.context_window

    @property
    def source(self) -> str:
        """Where `reported` came from ("config", "server: ...", "known", "default")."""
        return self.endpoint.context_window_source

    @property
    def asked(self) -> bool:
        """Whether the server was asked what it serves (else the window is a default or a guess)."""
        return was_asked(self.source)

    @property
    def planning(self) -> int:
        """The window to plan parts and notes in, in r3con's estimated tokens."""
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

    def recall(self, cache: CallCache) -> None:
        """Plan as the last run against this endpoint and model ended (what it kept in the LLM cache): its
        too-long requests were not paid, but a request of its first plan that fitted was answered and paid
        where the earlier run's had not been, so a repeat would pay for calls the first did not."""
        e = self.endpoint
        self.restore(cache.window(e.base_url, e.model, e.context_window), restored=True)

    def keep(self, cache: CallCache) -> None:
        """What this run learned, in the LLM cache for the next run (a full disk loses only that)."""
        if self.learned:
            e = self.endpoint
            with suppress(sqlite3.Error, OSError):
                cache.put_window(e.base_url, e.model, e.context_window, self.to_dict())

    def to_dict(self) -> dict[str, object]:
        return {"window": self.stated, "planning_window": self.planning, "scale": round(self.scale, 3),
                "learned_from": list(self.learned), **({"from_earlier_runs": self.restored} if self.restored else {})}
