"""The replies a run folder's calls.jsonl already holds, served again when the run is resumed.

`--resume` promises that answered calls are not paid again. The LLM cache keeps that promise when it
is on; with `--no-cache`, or another `--cache` file, the run folder's own record of its calls does:
every reply it logged (`--log-calls` compact or full) is served for the same request (`request_hash`),
as a cache hit would be, if it is still usable (complete, and valid JSON where a schema asks).
Replies that asked for tools, and folders logged with `--log-calls meta`, hold nothing to serve.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from .cache import usable
from .types import LLM, ChatRequest, Completion, Usage

_HASH = re.compile(rb'"request_hash": ?"([0-9a-f]+)"')  # a key: inside a JSON string every quote is escaped


class LoggedReplies:
    """Where a run folder's calls.jsonl holds each request's records (their byte offsets, by request_hash):
    a reply is read and parsed only when its request comes again, so resuming a run of 100,000
    documents does not hold its 150,000 answered replies in memory. `get(request_hash)` is the last
    usable reply logged for it: answered, not failed, no tool calls (None when there is none)."""

    def __init__(self, calls_log: Path | None):
        self.path = calls_log
        self._at: dict[str, list[int]] = {}
        self._file: BinaryIO | None = None
        if calls_log is None or not calls_log.is_file():
            return
        offset = 0
        with calls_log.open("rb") as f:
            for line in f:
                found = _HASH.search(line)
                if found is not None:
                    self._at.setdefault(found.group(1).decode(), []).append(offset)
                offset += len(line)

    def __len__(self) -> int:
        return len(self._at)

    def get(self, key: str) -> Completion | None:
        offsets = self._at.get(key)
        if not offsets:
            return None
        if self._file is None:
            assert self.path is not None  # offsets come only from a file
            self._file = self.path.open("rb")
        for offset in reversed(offsets):  # the last usable record, as the log's order has it
            self._file.seek(offset)
            try:
                record = json.loads(self._file.readline())
            except ValueError:  # a line cut by a killed run
                continue
            reply = _reply(record) if isinstance(record, dict) and record.get("request_hash") == key else None
            if reply is not None:
                return reply
        return None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _reply(record: dict[str, Any]) -> Completion | None:
    """The reply a logged call record holds, served as from the cache; None for a failed call, one that
    asked for tools, or a record without a reply."""
    response, key = record.get("response"), record.get("request_hash")
    if not isinstance(response, dict) or not isinstance(key, str) or record.get("error") \
            or response.get("tool_calls") or not isinstance(response.get("content"), str):
        return None
    usage = record.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return Completion(
        content=response["content"], reasoning=response.get("reasoning"),
        finish_reason=record.get("finish_reason"), model=str(record.get("model") or ""),
        usage=Usage.from_dict({k: v for k, v in usage.items() if k != "events"}), from_cache=True)


class FolderReplies:
    """Serves a request the run folder already holds a usable reply to; asks the layer below otherwise."""

    def __init__(self, inner: LLM, replies: LoggedReplies):
        self.inner = inner
        self.replies = replies

    async def complete(self, request: ChatRequest) -> Completion:
        hit = self.replies.get(request.fingerprint())
        if hit is not None and usable(request, hit):
            return replace(hit, from_cache=True)
        return await self.inner.complete(request)
