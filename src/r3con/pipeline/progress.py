"""How the pipeline reports progress: a small protocol the CLI implements (rich or plain lines)."""

from __future__ import annotations

from typing import Protocol

from ..llm.types import Usage


class Progress(Protocol):
    def stage(self, name: str, total: int) -> None:
        """A stage starts with `total` units of work."""

    def advance(self, name: str) -> None:
        """One unit of `name` is done."""

    def usage(self, total: Usage) -> None:
        """Usage so far."""

    def note(self, line: str) -> None:
        """Something the run waits on (a rate limit): shown until the stage moves on."""


class NoProgress:
    """Reports nothing (the library default)."""

    def stage(self, name: str, total: int) -> None:
        pass

    def advance(self, name: str) -> None:
        pass

    def usage(self, total: Usage) -> None:
        pass

    def note(self, line: str) -> None:
        pass
