"""A run you can hold: `Run` owns one run of the method, with its plan, its events and a cancel.

`start` (or `begin`, for a run `prepare` made ready) returns once the run has its folder and plan and
before any call is sent; the run then goes on in a task of the caller's event loop. Whoever follows it (the
CLI's progress, the app, the MCP server, traces) iterates `run.events()`, each from the first event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..artifacts.folder import is_disk_full
from ..config import Settings
from ..corpus.documents import Document
from ..errors import R3conError, RunCancelled
from ..llm import Wrap
from ..llm.types import LLM
from ..pipeline.events import Cancelled, Emit, Event, EventLog, Failed, Finished, Started
from ..pipeline.method import RunResult, StoreUse
from ..pipeline.method import run as run_method
from ..pipeline.planned import Plan
from ..results import RunEnd
from ._prepare import Prepared, ReadOptions, prepare, prepare_resume

__all__ = ["Run", "begin", "resume", "start"]


class Run:
    """One run of the method: its plan, its folder, its events, its outcome; `cancel()` ends it resumably.

    Made by `start`, `resume` or `begin`; not constructed directly."""

    def __init__(self, prepared: Prepared):
        self.prepared = prepared
        self.question = prepared.question
        self.plan: Plan | None = None  # set from the `started` event, before `begin` returns
        self.run_dir: Path | None = prepared.run_folder
        self.end: RunEnd | None = None  # how the run left off, if it raised (its stage and report)
        self._log = EventLog()
        self._task: asyncio.Task[RunResult] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = asyncio.Event()

    def __repr__(self) -> str:
        return f"Run(question={self.question[:60]!r}, status={self.status!r}, run_dir={str(self.run_dir)!r})"

    @property
    def status(self) -> str:
        """"running", "finished", "failed" or "cancelled"."""
        last = self._log[len(self._log) - 1].kind if len(self._log) else ""
        return {"finished": "finished", "failed": "failed", "cancelled": "cancelled"}.get(last, "running")

    def done(self) -> bool:
        return self._log.closed

    def events(self, start: int = 0) -> AsyncIterator[Event]:
        """Every event of the run from the `start`-th (the first, by default), as they come, until the final one
        (`finished`, `failed` or `cancelled`). Any number of followers may iterate at once."""
        return self._log.follow(start)

    def listen(self, listener: Emit) -> None:
        """Call `listener` with each event in the thread that emits it (the events so far first): for a
        synchronous consumer such as a progress display."""
        self._log.listen(listener)

    def cancel(self) -> None:
        """End the run: safe from any task or thread. It ends with a `cancelled` event; its folder keeps what
        was done, and `resume(run.run_dir)` continues it without paying again for any answered call."""
        task, loop = self._task, self._loop
        if task is None or loop is None or task.done():
            return
        if _running_loop() is loop:
            task.cancel()
        else:
            loop.call_soon_threadsafe(task.cancel)

    async def result(self) -> RunResult:
        """The run's result once it ends; the error that ended it, or `RunCancelled`. Waiting is shielded: a
        caller that stops waiting does not end the run (`cancel` does)."""
        if self._task is None:
            raise RuntimeError("the run was not begun")
        try:
            return await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if not self._task.cancelled():
                raise  # the caller was cancelled, not the run
            stage = self.end.stage if self.end is not None else None
            folder = f"; continue it with r3con.resume({str(self.run_dir)!r})" if self.run_dir else ""
            raise RunCancelled(f"the run was cancelled{f' in {stage}' if stage else ''}{folder}",
                               run_dir=self.run_dir, stage=stage) from None

    async def until_done(self) -> RunResult:
        """`result()` for the run's owner: if the owner is cancelled (Ctrl-C in a script), the run is cancelled
        too and waited for, so its folder is left resumable before the cancellation goes on."""
        try:
            return await self.result()
        except asyncio.CancelledError:
            self.cancel()
            await self.wait()
            raise

    async def wait(self) -> None:
        """Until the run has ended, however it ended."""
        if self._task is not None:
            await asyncio.wait([self._task])

    async def _main(self, llm: LLM | None, layers: Sequence[Wrap]) -> RunResult:
        prepared = self.prepared
        corpus = prepared.corpus
        try:
            result = await run_method(
                prepared.question, corpus.documents, prepared.settings, llm=llm, events=self._emit,
                run_folder=prepared.run_folder, inputs=corpus.inputs, on_end=self._ended,
                store=StoreUse(prepared.store, corpus.stored), layers=layers)
        except asyncio.CancelledError:
            self._emit(Cancelled(stage=self._stage(), run_dir=_str(self.run_dir)))
            raise
        except BaseException as exc:
            self._emit(Failed(error=message(exc), stage=self._stage(), run_dir=_str(self.run_dir)))
            raise
        else:
            self.run_dir = result.run_dir
            self._emit(Finished(answer=result.answer, run_dir=str(result.run_dir), usage=result.usage.to_dict()))
            return result
        finally:
            prepared.close()

    def _emit(self, event: Event) -> None:
        if isinstance(event, Started):
            self.plan, self.run_dir = event.plan, Path(event.run_dir)
            self._started.set()
        self._log.emit(event)

    def _ended(self, end: RunEnd) -> None:
        self.end, self.run_dir = end, end.run_dir

    def _stage(self) -> str | None:
        return self.end.stage if self.end is not None else None


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def message(exc: BaseException) -> str:
    """The one line a person reads of what ended a run."""
    if isinstance(exc, R3conError):
        return str(exc)
    if is_disk_full(exc):
        return f"no space left on the device while writing {getattr(exc, 'filename', None) or 'the run folder'}"
    return f"internal error (a bug in r3con: please report it): {exc}"


async def begin(prepared: Prepared, *, llm: LLM | None = None, layers: Sequence[Wrap] = ()) -> Run:
    """Start the run `prepared` describes in a task of this event loop; returns once it has its folder and
    plan (before any call), or raises what ended it before that (an endpoint that does not answer, ...).
    `llm`: a model of your own in place of the endpoint; `layers`: layers of your own in the LLM stack
    (`r3con.llm.Wrapper` subclasses)."""
    run = Run(prepared)
    run._loop = asyncio.get_running_loop()
    run._task = asyncio.ensure_future(run._main(llm, layers))
    # the outcome is the `finished`/`failed`/`cancelled` event's and `result()`'s to give: a run nobody awaits is
    # not reported by asyncio as an exception never retrieved
    run._task.add_done_callback(lambda task: task.cancelled() or task.exception())
    started = asyncio.ensure_future(run._started.wait())
    try:
        await asyncio.wait([run._task, started], return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the caller gave up while the run was starting: so does the run
        run._task.cancel()
        await asyncio.wait([run._task])
        raise
    finally:
        started.cancel()
    if not run._started.is_set():
        run._task.result()  # raises what ended it; a run that ended before its plan without error is our bug
        raise RuntimeError("the run ended before it started")
    return run


async def start(question: str, inputs: Sequence[str | Path | Document], settings: Settings | None = None, *,
                llm: LLM | None = None, layers: Sequence[Wrap] = (), read: ReadOptions | None = None,
                sample: str | None = None) -> Run:
    """Start answering `question` over `inputs` (paths: files, folders, globs; or `Document`s) with `settings`
    (`Settings.resolve()` when None: the environment and defaults). `llm`: a model of your own (any object
    with `complete(request) -> completion`), in place of the endpoint; `layers`: layers of your own in the LLM
    stack (`r3con.llm.Wrapper`). Returns the `Run` once it has its plan and folder, before any call: follow
    `run.events()`, `run.cancel()` it, `await run.result()`."""
    prepared = await asyncio.to_thread(prepare, question, inputs, settings, read=read, sample=sample)
    return await begin(prepared, llm=llm, layers=layers)


async def resume(run_dir: str | Path, flags: Mapping[str, Any] | None = None, *, llm: LLM | None = None,
                 layers: Sequence[Wrap] = (), read: ReadOptions | None = None) -> Run:
    """Continue the run in `run_dir` (cancelled, interrupted or failed): its question, documents and settings,
    with `flags` (settings that change how, not what, it computes: the endpoint, the cap, ...) over them.
    What its attempts were answered comes from its folder and the LLM cache: nothing is paid twice."""
    prepared = await asyncio.to_thread(prepare_resume, Path(run_dir), flags=flags, read=read)
    return await begin(prepared, llm=llm, layers=layers)
