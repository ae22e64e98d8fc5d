"""The run report: one self-contained `report.html` in the run folder, to see why the answer is what it is.

    render_report(run_dir)  the same page as a string (`r3con app` shows a run with it)
    write_report(run_dir)   read the folder (manifest, answer, evidence, notes, records, schema, transcript,
                            usage) and write report.html beside them; no server, no network
    summary_html(result)    the compact summary a notebook shows for a RunResult
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..files import write_atomic
from ._jupyter import summary_html
from ._load import load
from ._render import render_pieces

REPORT = "report.html"

__all__ = ["REPORT", "render_report", "summary_html", "try_write_report", "write_report"]


def render_report(run_dir: Path | str) -> str:
    """The report page of `run_dir` as a string (what `r3con app` shows of a run: the same view)."""
    folder = Path(run_dir)
    if not folder.is_dir():
        raise InputError(f"{folder} is not a run folder: pass the folder a run wrote (r3con-runs/...)")
    return "".join(render_pieces(load(folder)))


def write_report(run_dir: Path | str) -> Path:
    """Write `report.html` into `run_dir` from what the folder holds (a failed run's folder too); its path."""
    folder = Path(run_dir)
    if not folder.is_dir():
        raise InputError(f"{folder} is not a run folder: pass the folder a run wrote (r3con-runs/...)")
    return write_atomic(folder / REPORT, render_pieces(load(folder)))


def try_write_report(run_dir: Path | str) -> tuple[Path | None, str | None]:
    """`write_report`, for the end of a run: never raises (the run's work is done and saved), returns
    (path, None) or (None, one line saying why there is no report)."""
    try:
        return write_report(run_dir), None
    except Exception as exc:  # a report is a view of the folder: no failure of it may fail the run
        return None, f"report not written in {run_dir}: {type(exc).__name__}: {exc}"
