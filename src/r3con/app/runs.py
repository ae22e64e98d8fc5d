"""The runs the app holds: each the Run API's run (`r3con.runs`), relayed as plain dicts to whoever follows
it (replayed from the first for a late follower), with a cancel; known by an id from the moment it is asked,
before its documents are read and its endpoint probed (`r3con.runs.start` returns only then).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import InputError
from ..runs import Run, message
from ..runs import resume as resume_run
from ..runs import start as start_run
from .history import strip_class

FINAL = ("finished", "failed", "cancelled")
_ids = itertools.count(1)


class AppRun:
    """One run as the page sees it: its events so far (as dicts), its status, its folder."""

    def __init__(self, question: str):
        self.id = f"live-{next(_ids)}"
        self.question = question
        self.events: list[dict[str, Any]] = []
        self.status = "running"
        self.run_dir: Path | None = None
        self.held: Run | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._cancelled = False

    def add(self, event: dict[str, Any]) -> None:
        if self.status != "running":
            return
        if event.get("kind") in FINAL:
            self.status = str(event["kind"])
        if event.get("run_dir"):
            self.run_dir = Path(str(event["run_dir"]))
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
        """Cancel the run; one still starting (reading its documents) is cancelled as soon as it has begun."""
        self._cancelled = True
        if self.held is not None:
            self.held.cancel()
        elif self._task is not None:
            self._task.cancel()

    async def relay(self, begin: Callable[[], Awaitable[Run]]) -> None:
        """Begin the run and pass its events on as they come; a run that could not begin is said as failed."""
        try:
            self.held = await begin()
        except asyncio.CancelledError:
            self.add({"kind": "cancelled", "time": time.time(), "stage": None, "run_dir": None})
            return
        except Exception as exc:  # bad input, an endpoint that does not answer: the run's end, said plainly
            self.add({"kind": "failed", "time": time.time(), "error": strip_class(message(exc)), "stage": None,
                      "run_dir": None})
            return
        if self._cancelled:
            self.held.cancel()
        async for event in self.held.events():
            data = event.to_dict()
            if data.get("kind") == "failed":
                data["error"] = strip_class(str(data.get("error") or ""))
            self.add(data)
        try:
            await self.held.result()
        except Exception:  # what ended it was said by its final event; taken here so it is not logged as lost
            pass


def start(question: str, sources: list[Path], settings: Settings, *, llm: Any = None) -> AppRun:
    """Start a run of `question` over `sources` in the background; its events follow at once."""
    if not question.strip():
        raise InputError("the question is empty: type a question")
    run = AppRun(question)
    run._task = asyncio.create_task(run.relay(lambda: start_run(question, [str(s) for s in sources], settings,
                                                                llm=llm)))
    return run


def resume(run_dir: Path, settings: Settings, allowed: Callable[[Path], Path], *, llm: Any = None) -> AppRun:
    """Continue a cancelled or failed run in its folder (what it paid for is not paid again); its documents
    must be where the workspace reads (`allowed` raises otherwise)."""
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    for document in manifest.get("documents") or []:
        allowed(Path(str(document.get("source", ""))))
    run = AppRun(str(manifest.get("task", "")))
    # the endpoint and the cap of the app now (a demo's scripted server has a new port each start)
    flags = {"base_url": settings.base_url, "model": settings.model, "api_key": settings.api_key,
             "max_cost_usd": settings.max_cost_usd}
    run._task = asyncio.create_task(run.relay(lambda: resume_run(run_dir, flags, llm=llm)))
    return run


def with_run_settings(settings: Settings, *, max_cost_usd: float | None, reuse: str | None) -> Settings:
    """The app's settings for one run: its spending cap and how it reuses earlier runs."""
    changes: dict[str, Any] = {"max_cost_usd": max_cost_usd}
    if reuse in ("off", "exact", "approximate"):
        changes["reuse"] = reuse
    return dataclasses.replace(settings, **changes)
