"""The command line: thin commands that parse arguments and call the library."""

from __future__ import annotations

import os
import sys
import traceback

from ..errors import R3conError
from ._help import plain_command
from .app import app


def main() -> None:
    """Entry point of the `r3con` command: errors become one line and an exit code, never a traceback."""
    try:
        plain_command(app)(prog_name="r3con")
    except R3conError as exc:
        print(f"r3con: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("r3con: interrupted; the run folder keeps what was done", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # our own bug: say so plainly, keep the details available
        if os.environ.get("R3CON_DEBUG"):
            traceback.print_exc()
        print(f"r3con: internal error: {type(exc).__name__}: {exc} "
              "(please report it; set R3CON_DEBUG=1 for the traceback)", file=sys.stderr)
        sys.exit(1)
