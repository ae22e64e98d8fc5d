"""The replies a run folder's calls.jsonl already holds, for `answered.Answered` to serve when the run is resumed.

`--resume` promises that answered calls are not paid again. The LLM cache keeps that promise when it
is on; with `--no-cache`, or another `--cache` file, the run folder's own record of its calls does:
every reply it logged (`--log-calls` compact or full) is served for the same request (`request_hash`),
as a cache hit would be, if it is still usable (complete, and valid JSON where a schema asks).
Folders logged with `--log-calls meta` hold nothing to serve.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, BinaryIO

from ..types import Completion

_HASH = re.compile(rb'"request_hash": ?"([0-9a-f]+)"')  # a key: inside a JSON string every quote is escaped


class LoggedReplies:
    """Where a run folder's calls.jsonl holds each request's records (their byte offsets, by request_hash):
    a reply is read and parsed only when its request comes again, so resuming a large run does not hold
    every reply it already got in memory. `get(request_hash)` is the last
    reply logged for it that was answered, not failed (None when there is none)."""

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
    """The reply a logged call record holds (`Recorded`: the reply's fields, with the usage, model and finish
    reason beside them), served as from the cache; None for a failed call or a record without a reply."""
    response = record.get("response")
    if not isinstance(response, dict) or not isinstance(record.get("request_hash"), str) or record.get("error"):
        return None
    return Completion.from_record({**response, "usage": record.get("usage"), "model": record.get("model"),
                                   "finish_reason": record.get("finish_reason")})
