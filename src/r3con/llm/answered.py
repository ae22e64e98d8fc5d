"""The one owner of "this request was answered before", and the one way a reply is written and read.

A request is known by its fingerprint (`ChatRequest.fingerprint`), taken here, below `Shaped`: of the
request as it leaves for the endpoint, after every layer that rewrites it (the stage's model, the reply
cap, the window). `Answered` serves a request that was answered before from whichever source holds it,
in this order:

1. an earlier finished run of the same question (`reuse`: set as `earlier` once the run knows which
   runs apply), counted per document and stage so reuse's decisions read what it served;
2. this machine's LLM cache (`CallCache`), which also keeps every usable new reply;
3. the run folder being resumed (its calls.jsonl, `LoggedReplies`): what the run itself already paid
   for, served even with `--no-cache` or another cache file.

Everything else goes to the endpoint. A reply is written and read by `Completion.to_record` and
`Completion.from_record` only: the cache, the call log and the resumed folder hold the same fields.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from .cache import CallCache, cache_key, usable
from .types import LLM, ChatRequest, Completion, Usage

Where = tuple[str, str | None, int | None]  # stage, document key, round

SOURCES = ("earlier run", "cache", "run folder")


def where(request: ChatRequest) -> Where:
    """The stage, document part and round a request belongs to."""
    doc = None if request.doc is None else (
        f"{request.doc}.{request.part}" if request.part is not None else str(request.doc))
    return request.stage, doc, request.round


class Answered:
    """Serves a request that was answered before (an earlier run's, the cache's, the resumed folder's) as a
    cache hit; sends the rest on and keeps each usable new reply in the cache.

    `earlier(digest)`: an earlier finished run's reply to the request with that fingerprint, or None
    (set by `reuse.Reuse.bind`); `record(digest, stage, completion)` sees every answered call, served or
    sent, but for replies cut at max_tokens or filtered."""

    def __init__(self, inner: LLM, *, cache: CallCache | None = None, endpoint: str = "",
                 folder: Callable[[str], Completion | None] | None = None):
        self.inner = inner
        self.cache = cache
        self.endpoint = endpoint
        self.folder = folder
        self.earlier: Callable[[str], Completion | None] | None = None
        self.record: Callable[[str, str, Completion], None] | None = None
        self.served: Counter[str] = Counter()  # calls answered per source
        self.replayed: Counter[Where] = Counter()  # calls answered from an earlier run of the question
        self.sent: Counter[Where] = Counter()  # calls not answered from an earlier run (the cache's included)
        self.replayed_usage = Usage()

    def lookup(self, request: ChatRequest) -> tuple[Completion, str] | None:
        """The earlier reply to `request` and its source, or None."""
        digest = request.fingerprint()
        if self.earlier is not None:
            reply = self.earlier(digest)
            if reply is not None:
                return reply, SOURCES[0]
        if self.cache is not None:
            reply = self.cache.get(cache_key(self.endpoint, request))
            if reply is not None:
                return reply, SOURCES[1]
        if self.folder is not None:
            reply = self.folder(digest)
            if reply is not None and usable(request, reply):
                return reply, SOURCES[2]
        return None

    async def complete(self, request: ChatRequest) -> Completion:
        at = where(request)
        found = self.lookup(request)
        if found is not None:
            completion, source = replace(found[0], from_cache=True), found[1]
            self.served[source] += 1
        else:
            completion, source = await self.inner.complete(request), ""
            if self.cache is not None and usable(request, completion):
                self.cache.put(cache_key(self.endpoint, request), self.endpoint, request.stage, completion)
        if source == SOURCES[0]:
            self.replayed[at] += 1
            self.replayed_usage += Usage(calls=1, prompt_tokens=completion.usage.prompt_tokens,
                                         completion_tokens=completion.usage.completion_tokens)
        else:
            self.sent[at] += 1
        if self.record is not None and completion.finish_reason not in ("length", "content_filter"):
            self.record(request.fingerprint(), request.stage, completion)
        return completion
