"""The run folder's record of its calls (calls.jsonl): the log, the layer that writes it, and its summary."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, cast

from ...errors import BudgetExceeded, R3conError
from ..types import LLM, ChatRequest, Completion


def logged_calls(calls_log: Path | None) -> Iterator[dict[str, Any]]:
    """The records of a run folder's calls.jsonl (none when it is missing); a line cut by a killed run is passed over."""
    if calls_log is None or not calls_log.is_file():
        return
    with calls_log.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record


def logged_cost(record: dict[str, Any]) -> tuple[float, bool]:
    """What one calls.jsonl record cost in USD (cache hits and failed calls nothing), and whether its price was
    unknown."""
    usage = record.get("usage")
    if not isinstance(usage, dict) or record.get("from_cache"):
        return 0.0, False
    cost = usage.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost) and cost > 0:
        return float(cost), bool(usage.get("unpriced"))
    return 0.0, bool(usage.get("unpriced"))


class LogSummary:
    """What a calls.jsonl holds, kept as its lines are written so that nothing reads a log of many megabytes
    back: the calls' cost (`total()`, None once a price was unknown), how many calls, per stage the span from
    its first call's start to its last call's end and the calls' summed latency, and the log's size in bytes
    it covers (a reader trusts the summary only while the log is that size). A log's earlier lines (a resumed
    folder's) are read once, when it is opened."""

    def __init__(self) -> None:
        self.usd, self.unpriced, self.calls, self.bytes = 0.0, False, 0, 0
        self.spans: dict[str, list[float]] = {}
        self.latency: dict[str, float] = {}

    def add(self, record: dict[str, Any]) -> None:
        usd, unpriced = logged_cost(record)
        self.usd += usd
        self.unpriced = self.unpriced or unpriced
        self.calls += 1
        stage, start, took = record.get("stage"), record.get("time"), record.get("latency_s") or 0.0
        if not isinstance(stage, str) or not isinstance(start, int | float) or not isinstance(took, int | float):
            return
        end = record.get("end")
        end = end if isinstance(end, int | float) and end >= start else start + took  # older logs: no "end"
        lo_hi = self.spans.setdefault(stage, [start, end])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], start), max(lo_hi[1], end)
        self.latency[stage] = self.latency.get(stage, 0.0) + took

    @classmethod
    def of(cls, calls_log: Path | None) -> LogSummary:
        """The summary of the calls already in `calls_log`."""
        summary = cls.of_records(logged_calls(calls_log))
        summary.bytes = calls_log.stat().st_size if calls_log is not None and calls_log.is_file() else 0
        return summary

    @classmethod
    def of_records(cls, records: Iterable[dict[str, Any]]) -> LogSummary:
        summary = cls()
        for record in records:
            summary.add(record)
        return summary

    def copy(self) -> LogSummary:
        kept = LogSummary()
        kept.usd, kept.unpriced, kept.calls, kept.bytes = self.usd, self.unpriced, self.calls, self.bytes
        kept.spans, kept.latency = {k: list(v) for k, v in self.spans.items()}, dict(self.latency)
        return kept

    def total(self) -> float | None:
        """The USD spent, or None when a call had no known price."""
        return None if self.unpriced else self.usd

    def timing(self) -> dict[str, dict[str, float]]:
        """Per stage: `wall_s`, from its first call's start to its last call's end, and `latency_s`, summed."""
        return {s: {"wall_s": round(hi - lo, 3), "latency_s": round(self.latency[s], 3)}
                for s, (lo, hi) in self.spans.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "calls": self.calls, "stages": self.timing()}


RESERVE_BYTES = 4 << 20  # disk space calls.jsonl keeps reserved beyond its end, for the replies of a full disk


def reserve(fd: int, reserved_at: int | None = None, size: int | None = None) -> int | None:
    """Keep RESERVE_BYTES allocated beyond the end of the file `fd` (fallocate KEEP_SIZE: the size does not
    change), renewed once half is used; the size it was renewed at. So the replies that arrive once the disk
    is full are still written to calls.jsonl, and a resume pays for none of them again. Where the system has
    no such call nothing is reserved; a disk too full for the first reservation raises OSError (ENOSPC)."""
    size = os.fstat(fd).st_size if size is None else size
    if reserved_at is not None and size - reserved_at < RESERVE_BYTES // 2:
        return reserved_at
    fallocate = _fallocate()
    if fallocate is None or fallocate(fd, 1, size, RESERVE_BYTES) != 0:  # 1: FALLOC_FL_KEEP_SIZE
        if reserved_at is None and fallocate is not None and ctypes.get_errno() in _FULL:
            # none reserved yet, and no room for it: the replies of the calls about to go out could not be kept
            raise OSError(ctypes.get_errno(), "No space left on device: no room kept for the calls' replies")
        return reserved_at
    return size


_FULL = (errno.ENOSPC, errno.EDQUOT)


@functools.cache
def _fallocate() -> Callable[[int, int, int, int], int] | None:
    """Linux's fallocate(2) through libc, or None."""
    try:
        call = ctypes.CDLL(None, use_errno=True).fallocate
    except (AttributeError, OSError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    call.restype = ctypes.c_int
    return cast(Callable[[int, int, int, int], int], call)


class CallLog:
    """Appends one JSON line per LLM call (request, response, usage, latency, error) to a private file.

    `detail` says how much of each call it keeps: "full" every request and reply; "compact" (the
    default) every reply, and the request of the first call of each prompt template and of every call
    that failed (the others are rebuilt from the run's documents and notes; `request_hash` names them);
    "meta" neither requests nor replies, only what was called, tokens, cost, latency and errors.
    The file stays open and each line is flushed as it is written, so a killed run keeps every call
    it logged; `close()` (or the end of `build_llm`) releases it.
    """

    def __init__(self, path: Path | None, detail: str = "full"):
        self.path = path
        self.detail = detail
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        self._seen: set[str] = set()
        self._reserved_at: int | None = None  # the file's size when space was last reserved beyond its end
        self._summary: LogSummary | None = None  # the logged calls' cost, count and timing, earlier attempts' included
        # told every record as it is written (the run's `call` events): the events and the log are one account
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    def _kept(self, record: dict[str, Any]) -> dict[str, Any]:
        if self.detail == "full" or "request" not in record:
            return record
        prompt = str(record.get("prompt_hash") or record.get("prompt") or record.get("stage"))
        first = prompt not in self._seen
        self._seen.add(prompt)
        failed = "error" in record and not record.get("refused")  # a refused call never reached the endpoint
        drop = {"request", "response"} if self.detail == "meta" else (
            set() if first or failed else {"request"})
        return {k: v for k, v in record.items() if k not in drop}

    def write(self, record: dict[str, Any]) -> None:
        if self.path is not None:
            self._append(self.path, record)
        for listener in self.listeners:
            listener(record)

    def ready(self) -> None:
        """Open the file with its space reserved before a call is sent (`Recorded`), so that the reply is kept
        however full the disk gets meanwhile; on a disk too full to reserve any, OSError (ENOSPC), and the call
        is not sent: a reply nothing could keep would be paid for again on resume."""
        if self.path is not None and self._fh is None:
            with self._lock:
                self._open(self.path)

    def _open(self, path: Path) -> IO[str]:
        if self._fh is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # it holds the documents
            try:
                self._reserved_at = reserve(fd)
            except OSError:
                os.close(fd)
                raise
            self._fh = os.fdopen(fd, "a", encoding="utf-8")
        return self._fh

    def _append(self, path: Path, record: dict[str, Any]) -> None:
        with self._lock:
            line = json.dumps(self._kept(record), ensure_ascii=False, default=str) + "\n"
            summary = self._summary = self._summary or LogSummary.of(path)
            fh = self._open(path)
            fh.write(line)
            fh.flush()
            size = os.fstat(fh.fileno()).st_size
            summary.add(record)
            summary.bytes = size
            self._reserved_at = reserve(fh.fileno(), self._reserved_at, size)

    def summary(self) -> LogSummary:
        """The calls in the log, this attempt's and a resumed folder's earlier ones: cost, count, timing."""
        with self._lock:
            self._summary = self._summary or LogSummary.of(self.path)  # read once; the writes add to it
            return self._summary.copy()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                with contextlib.suppress(OSError):  # give back the space reserved beyond the end
                    os.ftruncate(self._fh.fileno(), os.fstat(self._fh.fileno()).st_size)
                self._fh.close()
                self._fh = None

    def __del__(self) -> None:  # a log nobody closed (a test's, a library user's) releases its file too
        fh = getattr(self, "_fh", None)
        if fh is not None:
            fh.close()


class Recorded:
    """Records every call: stage, document, round, prompt name and hash, model, tokens, cost, latency."""

    def __init__(self, inner: LLM, log: CallLog):
        self.inner = inner
        self.log = log

    async def complete(self, request: ChatRequest) -> Completion:
        started = time.time()
        record: dict[str, Any] = {
            "time": started,
            "stage": request.stage,
            "mode": request.mode,
            "doc": request.doc,
            "part": request.part,
            "round": request.round,
            "prompt": request.prompt_name,
            "prompt_hash": request.prompt_hash,
            "request_hash": request.fingerprint(),
            "request": request.canonical(),
        }
        self.log.ready()  # before the call goes out: its reply must have somewhere to go
        try:
            completion = await self.inner.complete(request)
        except R3conError as exc:
            ended = time.time()
            record.update(error=f"{type(exc).__name__}: {exc}", latency_s=round(ended - started, 4), end=ended)
            if isinstance(exc, BudgetExceeded):
                record["refused"] = True
            self.log.write(record)
            raise
        record.update(
            model=completion.model,
            finish_reason=completion.finish_reason,
            from_cache=completion.from_cache,
            **({"source": completion.served_from} if completion.served_from else {}),
            usage=completion.usage.to_dict(),
            latency_s=round(completion.latency_s, 4),
            end=time.time(),
            response=_response(completion),
        )
        self.log.write(record)
        return completion


def _response(completion: Completion) -> dict[str, Any]:
    """What the call log keeps of a reply beside its model, finish reason and usage (`Completion.to_record`)."""
    record = completion.to_record()
    return {"content": record["content"], "reasoning": record["reasoning"],
            **({"tool_calls": record["tool_calls"]} if record["tool_calls"] else {})}
