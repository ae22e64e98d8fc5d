"""What a person sees on stderr while a run works (a live display per stage, or plain lines) and after it.

Shared by the CLI and the demo, so it sits below both."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from .llm.types import Usage

WIDTH = 80  # the closing lines fit a standard terminal


def wrapped(line: str, width: int = WIDTH) -> str:
    """`line` broken at spaces to fit `width` columns, continued two spaces in; a word (a path) is never split."""
    import textwrap

    return "\n".join(textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False,
                                    break_on_hyphens=False)) or line


def path_lines(label: str, path: object) -> str:
    """A label on its line and the path alone on the next, to copy whole: "run folder:\n  r3con-runs/..."."""
    return f"{label}:\n  {path}"


def usage_line(usage: Usage) -> str:
    cached = f" ({usage.cached_tokens / usage.prompt_tokens:.0%} cached)" if usage.prompt_tokens else ""
    line = (f"{usage.calls} calls, {usage.prompt_tokens:,} prompt tokens{cached}, "
            f"{usage.completion_tokens:,} completion tokens, {usage.cost_text()}")
    if usage.cache_hits:
        line += f"; {usage.cache_hits} from cache (saved {usage.saved_tokens:,} tokens, ${usage.saved_usd:.4f})"
    events = ", ".join(f"{name} {n}" for name, n in sorted(usage.events.items()) if n)
    return f"{line}; {events}" if events else line


def cached_line(by_stage: Mapping[str, Usage]) -> str:
    """Share of each stage's prompt tokens the endpoint served from its prefix cache."""
    parts = [f"{stage} {u.cached_tokens / u.prompt_tokens:.0%} of {u.prompt_tokens:,}"
             for stage, u in by_stage.items() if u.prompt_tokens]
    return ", ".join(parts) or "no prompt tokens"


class PlainProgress:
    """One line when a stage starts, at every tenth of it, and when it ends."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self._totals: dict[str, int] = {}
        self._done: dict[str, int] = {}
        self._usage = Usage()
        self._started = time.monotonic()
        self._stage_started: dict[str, float] = {}

    def stage(self, name: str, total: int) -> None:
        self._totals[name] = total
        self._done[name] = 0
        self._stage_started[name] = time.monotonic()
        self._line(f"{name}: 0/{total}")

    def advance(self, name: str) -> None:
        self._done[name] = self._done.get(name, 0) + 1
        done, total = self._done[name], self._totals.get(name, 0)
        step = max(1, total // 10)
        if done == total or done % step == 0:
            left = eta(time.monotonic() - self._stage_started.get(name, self._started), done, total)
            self._line(f"{name}: {done}/{total}{f' (ETA {left})' if left else ''} | {usage_line(self._usage)}")

    def usage(self, total: Usage) -> None:
        self._usage = total

    def note(self, line: str) -> None:
        self._line(line)

    def close(self) -> None:
        pass

    def _line(self, text: str) -> None:
        print(f"[{time.monotonic() - self._started:6.1f}s] {text}", file=self.stream, flush=True)


def eta(elapsed_s: float, done: int, total: int) -> str:
    """The time the rest of a stage should take at the pace of its calls so far ("4m10s"); "" when done or unknown."""
    if done <= 0 or done >= total:
        return ""
    left = round(elapsed_s / done * (total - done))
    hours, rest = divmod(left, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s" if rest >= 60 else f"{rest}s"


def short_usage(usage: Usage) -> str:
    """Calls and cost in a few characters, for a progress line that must fit 80 columns."""
    if usage.unpriced:
        return f"{usage.calls} calls, price unknown"
    if usage.local_calls and usage.local_calls >= usage.calls and not usage.cost_usd:
        return f"{usage.calls} calls, local: free"
    return f"{usage.calls} calls ${usage.cost_usd:.4f}"


class LiveProgress:
    """A rich progress display: one bar per stage, with its count, time, calls and cost so far.

    The counts and the cost come first and the bar takes what is left, so at 80 columns they stay
    visible; the full usage line is printed at the end of the run.
    """

    def __init__(self, console: Console | None = None, start: bool = True) -> None:
        self._progress = Progress(
            TextColumn("{task.description:<9}"), MofNCompleteColumn(), TextColumn("{task.fields[usage]}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), BarColumn(bar_width=None),
            console=console or Console(stderr=True),
            transient=False, expand=True,
        )
        self._tasks: dict[str, TaskID] = {}
        self._usage = Usage()
        if start:
            self._progress.start()

    @property
    def display(self) -> Progress:
        return self._progress

    def stage(self, name: str, total: int) -> None:
        self._tasks[name] = self._progress.add_task(name, total=total, usage="")

    def advance(self, name: str) -> None:
        if name in self._tasks:
            self._progress.update(self._tasks[name], advance=1, usage=short_usage(self._usage))

    def usage(self, total: Usage) -> None:
        self._usage = total

    def note(self, line: str) -> None:
        if self._tasks:  # on the current stage's line, until its next step replaces it
            self._progress.update(list(self._tasks.values())[-1], usage=line)
        else:
            self._progress.console.print(line)

    def close(self) -> None:
        self._progress.stop()


def make_progress(quiet: bool = False) -> Followed | None:
    """What a person sees of a run's events on stderr: a live display on a terminal, plain lines elsewhere;
    None with `quiet`."""
    if quiet:
        return None
    return Followed(LiveProgress() if sys.stderr.isatty() else PlainProgress())


class Followed:
    """A progress display fed by a run's events (`pipeline.events`): a stage starts, a unit of it is done,
    the usage so far, a line to show. Called with each event as it is emitted."""

    def __init__(self, display: PlainProgress | LiveProgress):
        self.display = display

    def __call__(self, event: Any) -> None:
        kind, display = event.kind, self.display
        if kind == "stage" and event.state == "started":
            display.stage(event.stage, event.total)
        elif kind == "progress":
            display.advance(event.stage)
        elif kind == "usage":
            display.usage(Usage.from_dict(event.usage))
        elif kind == "message":
            display.note(event.text)

    def close(self) -> None:
        self.display.close()


def reuse_line(reuse: Mapping[str, Any]) -> str:
    """What a run took from the earlier run of its question: per stage, document parts reused of all."""
    counts = reuse.get("counts") or {}
    stages = ", ".join(f"{stage} {c['reused']:,}/{c['reused'] + c['recomputed']:,}" for stage, c in counts.items())
    return (f"{reuse.get('mode')} from {reuse.get('previous_run')}: {stages or 'nothing'} reused; "
            f"{reuse.get('calls_reused', 0):,} calls answered from its record (reuse.json says why per document)")
