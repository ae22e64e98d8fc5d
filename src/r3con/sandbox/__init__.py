"""The coding agent's REPL: a persistent worker in its own OS process (see `_simple`)."""

from ._simple import CellResult, IsolationReport, Sandbox, SandboxLimits

__all__ = ["CellResult", "IsolationReport", "Sandbox", "SandboxLimits"]
