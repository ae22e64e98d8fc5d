"""What a run says as it goes: frozen, typed events, and the log that keeps them for every follower.

The method tells its `Watch` what happened; the watch turns it into events (`Event` subclasses, each with a
`kind` and `to_dict()`), and the LLM stack's call log adds one `CallEvent` per line it writes to calls.jsonl.
Everything that follows a run reads these: the CLI's progress display, the app, the MCP server, traces.
An `EventLog` keeps them in order; a follower that comes late starts from the first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "CallEvent", "Cancelled", "Degraded", "Emit", "Event", "EventLog", "Failed", "Fallback", "Finished",
    "Message", "NoteEvent", "ProgressEvent", "RecordsEvent", "Replanned", "StageEvent", "Started",
    "UsageEvent", "WarningEvent", "call_event", "FINAL_KINDS",
]


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


@dataclass(frozen=True)
class Event:
    """One thing a run said. `kind` names what; `time` is when (seconds since the epoch)."""

    kind: ClassVar[str] = ""
    time: float = field(default_factory=time.time, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-safe data, with its `kind` first."""
        return {"kind": self.kind, **{f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}}


@dataclass(frozen=True)
class Started(Event):
    """The run has its folder and its plan; no call was sent yet."""

    kind: ClassVar[str] = "started"
    question: str
    run_dir: str
    plan: Any  # r3con.runs.Plan (typed loosely: the plan is made above this layer)
    resumed: bool = False


@dataclass(frozen=True)
class StageEvent(Event):
    """A stage started (with `total` units of work: documents, parts, rounds) or finished."""

    kind: ClassVar[str] = "stage"
    stage: str
    state: str  # "started" | "finished"
    total: int = 0


@dataclass(frozen=True)
class ProgressEvent(Event):
    """A unit of a stage finished: a document (or part) read in a round, populated, the schema, the answer."""

    kind: ClassVar[str] = "progress"
    stage: str
    done: int
    total: int


@dataclass(frozen=True)
class CallEvent(Event):
    """One LLM call, as its line in calls.jsonl says: where its reply came from, its tokens and cost."""

    kind: ClassVar[str] = "call"
    stage: str
    doc: str | None
    part: int | None
    round: int | None
    source: str  # "endpoint", "cache", "earlier run" or "resumed folder"
    model: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_usd: float | None
    latency_s: float
    error: str | None = None
    finish_reason: str | None = None
    started: float = 0.0  # when the call began (seconds since the epoch); `time` is when it ended


@dataclass(frozen=True)
class UsageEvent(Event):
    """The run's usage so far (`Usage.to_dict`: calls, tokens, cost, cache hits), after each call."""

    kind: ClassVar[str] = "usage"
    usage: Mapping[str, Any]


@dataclass(frozen=True)
class Replanned(Event):
    """A server's "too long" reply taught a smaller window: the parts and notes are planned again for it."""

    kind: ClassVar[str] = "replanned"
    window: int
    parts: int
    part_tokens: int


@dataclass(frozen=True)
class NoteEvent(Event):
    """A document's relevance note of a round, as kept ('' when the model found the document irrelevant)."""

    kind: ClassVar[str] = "note"
    doc: str
    round: int
    text: str


@dataclass(frozen=True)
class RecordsEvent(Event):
    """A document's records after population."""

    kind: ClassVar[str] = "records"
    doc: str
    count: int


@dataclass(frozen=True)
class Message(Event):
    """A line for the person watching: the plan, what the run waits on (a rate limit)."""

    kind: ClassVar[str] = "message"
    text: str


@dataclass(frozen=True)
class WarningEvent(Event):
    """Something the run noticed that may affect the answer."""

    kind: ClassVar[str] = "warning"
    text: str


@dataclass(frozen=True)
class Fallback(Event):
    """A stage failed and the run went on without it (a schema that never validated: answered from the notes)."""

    kind: ClassVar[str] = "fallback"
    stage: str
    failed: str
    fallback: str


@dataclass(frozen=True)
class Degraded(Event):
    """A document (or part) failed in a stage; the run goes on without it."""

    kind: ClassVar[str] = "degraded"
    doc: str
    stage: str
    error: str


@dataclass(frozen=True)
class Finished(Event):
    """The run answered. `usage`: calls, tokens and cost (`Usage.to_dict`)."""

    kind: ClassVar[str] = "finished"
    answer: str
    run_dir: str
    usage: Mapping[str, Any]


@dataclass(frozen=True)
class Failed(Event):
    """The run ended with an error: its one-line message, the stage, the folder (None: none was made)."""

    kind: ClassVar[str] = "failed"
    error: str
    stage: str | None
    run_dir: str | None


@dataclass(frozen=True)
class Cancelled(Event):
    """The run was cancelled; its folder (if one was made) keeps what was done and resumes."""

    kind: ClassVar[str] = "cancelled"
    stage: str | None
    run_dir: str | None


FINAL_KINDS = frozenset({Finished.kind, Failed.kind, Cancelled.kind})

Emit = Callable[[Event], None]


_SOURCES = {"earlier run": "earlier run", "cache": "cache", "run folder": "resumed folder"}


def call_event(record: Mapping[str, Any]) -> CallEvent:
    """The event of one calls.jsonl record (`llm.layers.Recorded` writes it): the same numbers, so the events
    and the log cannot disagree."""
    logged = record.get("usage")
    usage: Mapping[str, Any] = logged if isinstance(logged, Mapping) else {}
    source = str(record.get("source") or "")
    from_cache = bool(record.get("from_cache"))
    cost = usage.get("cost_usd")
    doc = record.get("doc")
    return CallEvent(
        stage=str(record.get("stage") or ""), doc=None if doc is None else str(doc), part=record.get("part"),
        round=record.get("round"), source=_SOURCES.get(source, "cache") if from_cache else "endpoint",
        model=record.get("model"), prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0), cached_tokens=int(usage.get("cached_tokens") or 0),
        cost_usd=None if from_cache else (float(cost) if isinstance(cost, int | float) else None),
        latency_s=float(record.get("latency_s") or 0.0), error=record.get("error"),
        finish_reason=record.get("finish_reason"), started=float(record.get("time") or 0.0),
        time=float(record.get("end") or time.time()),
    )


class EventLog:
    """A run's events in the order they came, for any number of followers, each from the first event.

    `emit` may be called from any thread; followers (`follow`) may iterate in any event loop. The log
    ends with the first final event (`finished`, `failed`, `cancelled`); what comes after it is dropped."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._listeners: list[Emit] = []

    @property
    def closed(self) -> bool:
        return bool(self._events) and self._events[-1].kind in FINAL_KINDS

    def __len__(self) -> int:
        return len(self._events)

    def __getitem__(self, index: int) -> Event:
        return self._events[index]

    def emit(self, event: Event) -> None:
        with self._lock:
            if self.closed:
                return
            self._events.append(event)
            waiters, self._waiters = self._waiters, []
            listeners = list(self._listeners)
        for listener in listeners:  # in the emitting thread, in order: a display, a record
            listener(event)
        for loop, waiter in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, waiter)

    def listen(self, listener: Emit) -> None:
        """Call `listener` with every event from now on, in the thread that emits it (for synchronous
        consumers such as a progress display); the events before it are given to it first."""
        with self._lock:
            past = list(self._events)
            self._listeners.append(listener)
        for event in past:
            listener(event)

    async def follow(self, start: int = 0) -> AsyncIterator[Event]:
        """Every event from the `start`-th on, waiting for new ones until the final one."""
        index = start
        while True:
            with self._lock:
                if index < len(self._events):
                    event = self._events[index]
                    waiter = None
                elif self.closed:
                    return
                else:
                    loop = asyncio.get_running_loop()
                    waiter = loop.create_future()
                    self._waiters.append((loop, waiter))
            if waiter is None:
                index += 1
                yield event
            else:
                await waiter


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
