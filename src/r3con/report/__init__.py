"""The run report: one self-contained `report.html` in the run folder, to see why the answer is what it is.

    write_report(run_dir)   read the folder (manifest, answer, evidence, notes, records, schema, transcript,
                            usage) and write report.html beside them; no server, no network
    summary_html(result)    the compact summary a notebook shows for a RunResult
"""

from __future__ import annotations

from pathlib import Path

from .._files import write_atomic
from ._jupyter import summary_html
from ._load import load
from ._render import render

REPORT = "report.html"

__all__ = ["REPORT", "summary_html", "write_report"]


def write_report(run_dir: Path | str) -> Path:
    """Write `report.html` into `run_dir` from what the folder holds (a failed run's folder too); its path."""
    folder = Path(run_dir)
    return write_atomic(folder / REPORT, render(load(folder)))
