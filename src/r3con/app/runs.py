"""The runs the app holds: each a stream of events the page follows (replayed from the first for a late
follower), a cancel, and its run folder once it has one.

The events are the Run API's (`started`, `stage`, `progress`, `call`, `message`, `warning`, `fallback`,
`degraded`, then one of `finished`, `failed`, `cancelled`), as plain dicts. Where `r3con.start` exists its
own events are passed on; before it, the pipeline's progress is turned into the same kinds here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import InputError, R3conError
from ..llm.types import Usage

FINAL = ("finished", "failed", "cancelled")
_ids = itertools.count(1)


class AppRun:
    """One run as the page sees it: its events so far, its status, its folder."""

    def __init__(self, question: str, resumed: bool = False):
        self.id = f"live-{next(_ids)}"
        self.question, self.resumed = question, resumed
        self.events: list[dict[str, Any]] = []
        self.status = "running"
        self.run_dir: Path | None = None
        self.stage: str | None = None
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None
        self._cancel: Callable[[], object] | None = None

    def emit(self, kind: str, **fields: Any) -> None:
        """Add an event (from any thread: the pipeline's progress may be told from a worker)."""
        event = {"kind": kind, "time": time.time(), **fields}
        if threading.get_ident() == self._thread:
            self._add(event)
        else:
            self._loop.call_soon_threadsafe(self._add, event)

    def _add(self, event: dict[str, Any]) -> None:
        if self.status != "running":
            return
        if event["kind"] in FINAL:
            self.status = event["kind"]
        if event.get("run_dir"):
            self.run_dir = Path(event["run_dir"])
        self.events.append(event)
        self._changed.set()
        self._changed = asyncio.Event()

    async def follow(self) -> AsyncIterator[dict[str, Any]]:
        """Every event from the first; ends after the final one."""
        seen = 0
        while True:
            while seen < len(self.events):
                seen += 1
                yield self.events[seen - 1]
            if self.status != "running":
                return
            await self._changed.wait()

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel()
        elif self._task is not None:
            self._task.cancel()


class Progressed:
    """The pipeline's `Progress`, told as events (until the Run API gives them itself)."""

    def __init__(self, run: AppRun, find_folder: Callable[[], Path | None]):
        self.run, self.find_folder = run, find_folder
        self.totals: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.last = Usage()

    def stage(self, name: str, total: int) -> None:
        if self.run.run_dir is None and (folder := self.find_folder()) is not None:
            self.run.emit("started", run_dir=str(folder), question=self.run.question, resumed=self.run.resumed,
                          plan=None)
        if self.run.stage and self.run.stage != name:
            self.run.emit("stage", stage=self.run.stage, state="finished", total=self.totals.get(self.run.stage, 0))
        self.run.stage = name
        self.totals[name], self.done[name] = total, 0
        self.run.emit("stage", stage=name, state="started", total=total)

    def advance(self, name: str) -> None:
        self.done[name] = self.done.get(name, 0) + 1
        self.run.emit("progress", stage=name, done=self.done[name], total=self.totals.get(name, 0))

    def usage(self, total: Usage) -> None:
        if total.calls != self.last.calls or total.cache_hits != self.last.cache_hits:
            self.last = total
            self.run.emit("usage", calls=total.calls, cache_hits=total.cache_hits, prompt_tokens=total.prompt_tokens,
                          completion_tokens=total.completion_tokens, cost_usd=total.known_cost)

    def note(self, line: str) -> None:
        self.run.emit("message", text=line)


def _new_folder(out_dir: Path, before: set[str]) -> Callable[[], Path | None]:
    def find() -> Path | None:
        if not out_dir.is_dir():
            return None
        fresh = [p for p in out_dir.iterdir() if p.is_dir() and p.name not in before]
        return max(fresh, key=lambda p: p.stat().st_mtime) if fresh else None
    return find


async def _drive(run: AppRun, work: Callable[[Progressed], Awaitable[Any]], out_dir: Path) -> None:
    """Run the pipeline, then say how it ended as the final event."""
    before = {p.name for p in out_dir.iterdir()} if out_dir.is_dir() else set()
    progress = Progressed(run, _new_folder(out_dir, before))
    ends: list[Any] = []
    try:
        result = await work(progress)
    except asyncio.CancelledError:
        run.emit("cancelled", stage=run.stage, run_dir=str(ends[-1].run_dir) if ends else _str(progress.find_folder()))
        return
    except Exception as exc:
        run.emit("failed", error=error_text(exc), stage=run.stage, run_dir=_str(run.run_dir or progress.find_folder()))
        return
    if run.stage:
        run.emit("stage", stage=run.stage, state="finished", total=progress.totals.get(run.stage, 0))
    for used in result.fallbacks:
        run.emit("fallback", stage=used["stage"], failed=used["failed"], fallback=used["fallback"])
    for failure in result.degraded:
        run.emit("degraded", doc=str(failure.doc), stage=failure.stage, error=failure.error)
    for line in result.warnings:
        run.emit("warning", text=line)
    usage = result.usage.to_dict()
    run.emit("finished", answer=result.answer, run_dir=str(result.run_dir), usage=usage)


def _str(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def error_text(exc: BaseException) -> str:
    """What a person reads of an error: its message, never its class name."""
    if isinstance(exc, R3conError):
        return str(exc)
    return f"the run stopped on an unexpected error ({exc}); the run folder's error.json holds the details"


def start(question: str, sources: list[Path], settings: Settings, *, llm: Any = None) -> AppRun:
    """Start a run of `question` over `sources` in the background; its events follow at once."""
    if not question.strip():
        raise InputError("the question is empty: type a question")
    run = AppRun(question)

    async def work(progress: Progressed) -> Any:
        from ..corpus.documents import load_corpus
        from ..pipeline.method import run as run_pipeline

        corpus = await asyncio.to_thread(load_corpus, [str(s) for s in sources])
        return await run_pipeline(question, corpus.documents, settings, progress=progress, llm=llm,
                                  inputs=corpus.inputs)

    run._task = asyncio.create_task(_drive(run, work, settings.out_dir))
    return run


def resume(run_dir: Path, settings: Settings, allowed: Callable[[Path], Path], *, llm: Any = None) -> AppRun:
    """Continue a cancelled or failed run in its folder (what it paid for is not paid again)."""
    from ..pipeline.resume import check_question, locate_sources, read_resume

    plan = read_resume(run_dir)
    question = check_question(plan, None)
    paths, _ = locate_sources(plan)
    for path in paths:
        allowed(Path(path))
    resumed = Settings.resolve(env={}, **{**plan.settings, "base_url": settings.base_url, "model": settings.model,
                                          "api_key": settings.api_key, "out_dir": settings.out_dir,
                                          "cache_path": settings.cache_path, "max_cost_usd": settings.max_cost_usd})
    run = AppRun(question, resumed=True)
    run.emit("started", run_dir=str(run_dir), question=question, resumed=True, plan=None)

    async def work(progress: Progressed) -> Any:
        from ..corpus.documents import load_corpus
        from ..pipeline.method import run as run_pipeline
        from ..pipeline.resume import carried_inputs, check_documents

        numbers = {str(d["source"]): int(d["doc"]) for d in plan.documents if "doc" in d}
        corpus = await asyncio.to_thread(load_corpus, paths, numbers=numbers)
        check_documents(plan, corpus.documents)
        inputs = carried_inputs(plan, corpus.inputs)
        return await run_pipeline(question, corpus.documents, resumed, progress=progress, llm=llm,
                                  run_folder=run_dir, inputs=inputs)

    run._task = asyncio.create_task(_drive(run, work, settings.out_dir))
    return run


def with_run_settings(settings: Settings, *, max_cost_usd: float | None, reuse: str | None) -> Settings:
    """The app's settings for one run: its spending cap and how it reuses earlier runs."""
    changes: dict[str, Any] = {"max_cost_usd": max_cost_usd}
    if reuse in ("off", "exact", "approximate"):
        changes["reuse"] = reuse
    return dataclasses.replace(settings, **changes)
