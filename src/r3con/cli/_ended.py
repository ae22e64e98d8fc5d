"""How a command ends when it fails or is interrupted: one error line, the report line of a run that raised, an exit
code; SIGTERM taken as Ctrl-C, and the line an interrupted run ends with."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import traceback
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from ..artifacts.folder import is_disk_full
from ..display import path_lines
from ..errors import DiskFull, R3conError

T = TypeVar("T")

if TYPE_CHECKING:
    from ..pipeline.method import RunResult
    from ..results import RunEnd


def failed(exc: BaseException, end: RunEnd | None = None, *, quiet: bool = False) -> int:
    """Say how a command failed: its one error line (and the report line of a run that ended, `end`);
    returns the exit code. Our own bugs print their traceback too with R3CON_DEBUG=1."""
    if not isinstance(exc, R3conError) and os.environ.get("R3CON_DEBUG"):
        traceback.print_exception(exc)
    print(error_line(exc, end), file=sys.stderr)
    report_line(end, quiet=quiet)
    return exc.exit_code if isinstance(exc, R3conError) else 1


def error_line(exc: BaseException, end: RunEnd | None = None) -> str:
    """The one line an error ends a command with: what happened, its cause, and where the run folder is
    (`end`: how the run it ended left off, if it ended one)."""
    folder: Path | None = end.run_dir if end is not None else exc.run_dir if isinstance(exc, DiskFull) else None
    if isinstance(exc, R3conError):
        during = end.stage if end is not None else exc.stage if isinstance(exc, DiskFull) else None
        stage = f" in {during}" if during and during not in str(exc) else ""
        line = f"r3con: error{stage}: {exc}"
        if folder is not None:
            line = line.replace("--resume RUN_DIR", f"--resume {folder}")  # messages written before the folder was known
        if folder is not None and "--resume" not in line:
            line += f"; then continue with r3con run --resume {folder} (the run folder keeps what was done)"
        return line
    if is_disk_full(exc):
        where = getattr(exc, "filename", None) or folder or "the output folder"
        return f"r3con: error: no space left on the device while writing {where}; free some space and run again"
    saved = f"with {folder / 'error.json'}, which holds the traceback" if folder is not None else \
        "set R3CON_DEBUG=1 for the traceback"
    return f"r3con: internal error: {type(exc).__name__}: {exc} (a bug in r3con: please report it, {saved})"


def report_line(outcome: RunResult | RunEnd | None, *, quiet: bool = False) -> None:
    """`report: PATH` on stderr for a run's result or how a run that raised ended, or one warning line
    when the report could not be written (the run's own outcome stands either way)."""
    if outcome is None:
        return
    if outcome.report_error:
        print(f"r3con: warning: {outcome.report_error}", file=sys.stderr)
    elif outcome.report is not None and not quiet:
        print(path_lines("report", outcome.report), file=sys.stderr)  # the path alone on its line


@contextmanager
def terminate_as_interrupt() -> Iterator[list[int]]:
    """SIGTERM ends a run as Ctrl-C does: the run is cancelled and saves what it did. Yields the
    signals received, so the exit code can say which one (130 for SIGINT, 143 for SIGTERM)."""
    received: list[int] = []
    try:
        previous = signal.signal(signal.SIGTERM, _on_terminate_handler(received))
    except ValueError:  # not the main thread (a library caller's): leave the signals alone
        yield received
        return
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def _on_terminate_handler(received: list[int]) -> Callable[[int, Any], None]:
    """SIGTERM outside the event loop: KeyboardInterrupt (SIGINT may be ignored, so it is not raised)."""
    def on_terminate(signum: int, frame: Any) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    return on_terminate


def run_stoppable(main: Coroutine[Any, Any, T], received: list[int]) -> T:
    """`asyncio.run(main)`, cancelled by SIGTERM as by Ctrl-C: KeyboardInterrupt (the run says where it
    left off through its `on_end`).

    SIGTERM goes straight to the event loop, which cancels `main`. Raising SIGINT instead is not
    enough: a shell without job control (`cmd &` in a script) starts its background jobs with SIGINT
    ignored, and asyncio then does not handle SIGINT at all."""
    async def stoppable() -> T:
        task = asyncio.current_task()

        def on_terminate() -> None:
            received.append(signal.SIGTERM)
            if task is not None:
                task.cancel()

        with suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_terminate)
        return await main

    try:
        return asyncio.run(stoppable())
    except asyncio.CancelledError as exc:
        if signal.SIGTERM not in received:
            raise
        raise KeyboardInterrupt from exc
    finally:
        with suppress(ValueError):  # the loop's handler is gone with the loop: SIGTERM is ours again
            signal.signal(signal.SIGTERM, _on_terminate_handler(received))


@contextmanager
def interrupt_sends_nothing(line: str = "r3con: interrupted before the run began; nothing was sent") -> Iterator[None]:
    """Ctrl-C while documents are read or split (before any call): `line` and exit 130, no traceback."""
    try:
        yield
    except KeyboardInterrupt:
        print(line, file=sys.stderr)
        raise typer.Exit(130) from None


def interrupted_line(end: RunEnd | None, resumed: Path | None = None) -> str:
    """What an interrupted run says: where the run folder is, what it kept, and how to continue (a resumed
    folder is named even when the run had not said where it stopped)."""
    folder = end.run_dir if end is not None else resumed
    if folder is None:
        return "r3con: interrupted before the run began; nothing was sent"
    calls = Path(folder) / "calls.jsonl"
    count = calls.read_bytes().count(b"\n") if calls.is_file() else 0
    return (f"r3con: interrupted; the run folder {folder} keeps what was done ({count} calls in calls.jsonl): "
            f"continue with r3con run --resume {folder}")
