"""The command line: thin commands that parse arguments and call the library."""

from __future__ import annotations

import sys

from ..errors import R3conError
from ._ended import error_line, failed

__all__ = ["NOTHING_SENT", "error_line", "main"]

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
        sys.exit(failed(exc))
    except KeyboardInterrupt:  # Ctrl-C while the command loads (the commands themselves say what was kept)
        print(NOTHING_SENT, file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # our own bug (or a full disk): say so plainly, keep the details available
        sys.exit(failed(exc))


def _typer_swallowed_an_interrupt(exc: SystemExit) -> bool:
    """Whether typer turned a KeyboardInterrupt into this exit 130 (the commands' own handling of Ctrl-C
    prints its line and exits without a cause)."""
    link: BaseException | None = exc.__context__
    while link is not None:
        if isinstance(link.__cause__, KeyboardInterrupt):
            return True
        link = link.__context__
    return False
