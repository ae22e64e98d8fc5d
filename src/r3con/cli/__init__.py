"""The command line: thin commands that parse arguments and call the library."""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from ..artifacts import is_disk_full
from ..errors import R3conError

NOTHING_SENT = "r3con: interrupted before the run began; nothing was sent"


def main() -> None:
    """Entry point of the `r3con` command: errors become one line and an exit code, never a traceback."""
    try:
        from ._help import plain_command  # imported here: Ctrl-C while the command loads ends as any other
        from .app import app

        plain_command(app)(prog_name="r3con")
    except SystemExit as exc:
        if exc.code == 130 and _typer_swallowed_an_interrupt(exc):  # Ctrl-C where no command said what it kept
            print(NOTHING_SENT, file=sys.stderr)
        raise
    except R3conError as exc:
        print(error_line(exc), file=sys.stderr)
        _report_line(exc, quiet=getattr(exc, "quiet", False))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:  # Ctrl-C while the command loads (the commands themselves say what was kept)
        print(NOTHING_SENT, file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # our own bug (or a full disk): say so plainly, keep the details available
        if os.environ.get("R3CON_DEBUG"):
            traceback.print_exc()
        print(error_line(exc), file=sys.stderr)
        _report_line(exc, quiet=getattr(exc, "quiet", False))
        sys.exit(1)


def error_line(exc: BaseException) -> str:
    """The one line an error ends a command with: what happened, its cause, and where the run folder is."""
    folder: Path | None = getattr(exc, "run_dir", None)
    if isinstance(exc, R3conError):
        stage = f" in {exc.stage}" if exc.stage and exc.stage not in str(exc) else ""
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


def _typer_swallowed_an_interrupt(exc: SystemExit) -> bool:
    """Whether typer turned a KeyboardInterrupt into this exit 130 (the commands' own handling of Ctrl-C
    prints its line and exits without a cause)."""
    link: BaseException | None = exc.__context__
    while link is not None:
        if isinstance(link.__cause__, KeyboardInterrupt):
            return True
        link = link.__context__
    return False


def _report_line(exc: BaseException, quiet: bool) -> None:
    from .app import report_line

    report_line(exc, quiet=quiet)
