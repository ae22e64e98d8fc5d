"""Warnings a command gives before it works: settings that look wrong but are not errors."""

from __future__ import annotations

import sys

from ..config import unknown_variables

MANY_ROUNDS = 4  # the paper's runs use 2 rounds; notes settle by the third or fourth


def warn_many_rounds(rounds: int) -> None:
    """A warning for more relevance rounds than the method needs: each is one call per document part."""
    if rounds > MANY_ROUNDS:
        print(f"r3con: warning: --rounds {rounds} is more than the method needs (2 by default; notes settle by "
              f"round {MANY_ROUNDS}), and each round is one call per document part; running {rounds} as asked, "
              "Ctrl-C stops it and --resume continues", file=sys.stderr)


def warn_unknown_variables() -> None:
    """A warning line for each R3CON_* variable that r3con does not read."""
    for line in unknown_variables():
        print(f"r3con: warning: {line}", file=sys.stderr)
