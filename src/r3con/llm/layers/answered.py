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

import errno
import sqlite3
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from ...artifacts.folder import is_disk_full
from ..cache import CallCache, cache_key, usable
from ..types import LLM, ChatRequest, Completion, Usage

Where = tuple[str, str | None, int | None]  # stage, document key, round

SOURCES = ("earlier run", "cache", "run folder")


def where(request: ChatRequest) -> Where:
    """The stage, document part and round a request belongs to (the part's key interned, as `Document.key` is:
    one string a document part however many calls name it)."""
    doc = None if request.doc is None else sys.intern(
        f"{request.doc}.{request.part}" if request.part is not None else str(request.doc))
    return request.stage, doc, request.round


class Answered:
    """Serves a request that was answered before (an earlier run's, the cache's, the resumed folder's) as a
    cache hit; sends the rest on and keeps each usable new reply in the cache.

    `earlier(digest)`: an earlier finished run's reply to the request with that fingerprint and the cache
    key it is kept under, or None (set by `reuse.Reuse.bind`); `record(digest, stage, key)` hears every
    answered call whose reply the cache keeps (`key`), served or sent, so the next run finds it there: a
    reply is stored once, in the cache.

    A new reply is committed on the event loop, before this coroutine yields: the concurrency slot below
    was freed when it arrived, so committing in a thread would let the loop send the next request first,
    and a killed run could then lose more than one reply per slot (a local SQLite commit is short beside the
    call it keeps)."""

    def __init__(self, inner: LLM, *, cache: CallCache | None = None, endpoint: str = "",
                 folder: Callable[[str], Completion | None] | None = None, own_replies_only: bool = False):
        self.inner = inner
        self.cache = cache
        self.endpoint = endpoint  # what the cache keys name as the answerer: a URL, or a user's model's identity
        # an earlier run's reply only when kept under this answerer's key: a user's model is known by its code,
        # which may have changed since; an HTTP endpoint's URL is operational (its model's name says what answers)
        self.own_replies_only = own_replies_only
        self.folder = folder
        self.earlier: Callable[[str], tuple[Completion, str] | None] | None = None
        self.record: Callable[[str, str, str], None] | None = None
        self.served: Counter[str] = Counter()  # calls answered per source
        self.replayed: Counter[Where] = Counter()  # calls answered from an earlier run of the question
        # calls not answered from an earlier run (the cache's included), counted only while there is one to
        # answer from (`earlier`): without, nothing is replayed and no one asks (it would hold a key a call)
        self.sent: Counter[Where] = Counter()
        self.replayed_usage = Usage()
        self._full: str | None = None  # the disk filled up while a reply was stored

    def lookup(self, request: ChatRequest) -> tuple[Completion, str, str | None] | None:
        """The earlier reply to `request`, its source, and the cache key it is kept under (None: not in the
        cache); None when none was given before."""
        digest = request.fingerprint()
        if self.earlier is not None:
            found = self.earlier(digest)
            if found is not None and (not self.own_replies_only or found[1] == cache_key(self.endpoint, request)):
                return found[0], SOURCES[0], found[1]
        if self.cache is not None:
            key = cache_key(self.endpoint, request)
            reply = self.cache.get(key)
            if reply is not None:
                return reply, SOURCES[1], key
        if self.folder is not None:
            reply = self.folder(digest)
            if reply is not None and usable(request, reply):
                return reply, SOURCES[2], None
        return None

    async def complete(self, request: ChatRequest) -> Completion:
        found = self.lookup(request)
        key: str | None = None
        if found is not None:
            completion, source, key = replace(found[0], from_cache=True, served_from=found[1]), found[1], found[2]
            self.served[source] += 1
        else:
            if self._full is not None:  # no call is sent that could not be kept: the run ends (DiskFull) instead
                raise OSError(errno.ENOSPC, f"No space left on device: the LLM cache could not store a reply "
                                            f"({self._full})")
            completion, source = await self.inner.complete(request), ""
            if self.cache is not None and usable(request, completion):
                key = self._keep(request, completion)
        at = where(request)
        if source == SOURCES[0]:
            self.replayed[at] += 1
            self.replayed_usage += Usage(calls=1, prompt_tokens=completion.usage.prompt_tokens,
                                         completion_tokens=completion.usage.completion_tokens)
        elif self.earlier is not None:
            self.sent[at] += 1
        if self.record is not None and key is not None and completion.finish_reason not in ("length", "content_filter"):
            self.record(request.fingerprint(), request.stage, key)
        return completion

    def _keep(self, request: ChatRequest, completion: Completion) -> str | None:
        """Store a new usable reply in the cache; its key, or None when the disk is full (the reply still goes
        up to calls.jsonl, which keeps space reserved for it: a resume serves it from there, and no further
        call is sent)."""
        assert self.cache is not None
        key = cache_key(self.endpoint, request)
        try:
            self.cache.put(key, self.endpoint, request.stage, completion)
        except (OSError, sqlite3.Error) as exc:
            if not is_disk_full(exc):
                raise
            self._full = str(exc)
            return None
        return key
