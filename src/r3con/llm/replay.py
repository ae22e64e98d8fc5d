"""The replies a run folder's calls.jsonl already holds, served again when the run is resumed.

`--resume` promises that answered calls are not paid again. The LLM cache keeps that promise when it
is on; with `--no-cache`, or another `--cache` file, the run folder's own record of its calls does:
every reply it logged (`--log-calls` compact or full) is served for the same request (`request_hash`),
as a cache hit would be, if it is still usable (complete, and valid JSON where a schema asks).
Replies that asked for tools, and folders logged with `--log-calls meta`, hold nothing to serve.
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

from .cache import usable
from .layers import logged_calls
from .types import LLM, ChatRequest, Completion, Usage

_USAGE = {f.name for f in fields(Usage)} - {"events"}  # events belong to the run that saw them


def replies_in(calls_log: Path | None) -> dict[str, Completion]:
    """{request_hash: reply} of every answered call `calls_log` holds (none when it is missing)."""
    out: dict[str, Completion] = {}
    for record in logged_calls(calls_log):
        response, key = record.get("response"), record.get("request_hash")
        if not isinstance(response, dict) or not isinstance(key, str) or record.get("error") \
                or response.get("tool_calls") or not isinstance(response.get("content"), str):
            continue
        usage = record.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        out[key] = Completion(
            content=response["content"], reasoning=response.get("reasoning"),
            finish_reason=record.get("finish_reason"), model=str(record.get("model") or ""),
            usage=Usage(**{k: v for k, v in usage.items() if k in _USAGE}), from_cache=True)
    return out


class FolderReplies:
    """Serves a request the run folder already holds a usable reply to; asks the layer below otherwise."""

    def __init__(self, inner: LLM, replies: dict[str, Completion]):
        self.inner = inner
        self.replies = replies

    async def complete(self, request: ChatRequest) -> Completion:
        hit = self.replies.get(request.fingerprint())
        if hit is not None and usable(request, hit):
            return replace(hit, from_cache=True)
        return await self.inner.complete(request)
