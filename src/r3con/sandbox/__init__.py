"""A sandbox for the coding agent's Python: an isolated, persistent worker process.

The code the agent writes comes from a model that read untrusted documents, so it is contained by the
operating system, not by the interpreter: its own process and session, rlimits, an environment built
from scratch, network, PID, IPC and mount namespaces with a read-only root, and an unprivileged uid.
`Sandbox.isolation` reports which of these the kernel allowed.
"""

from __future__ import annotations

from ._results import CellResult, IsolationReport, SandboxLimits
from ._sandbox import Sandbox

__all__ = ["CellResult", "IsolationReport", "Sandbox", "SandboxLimits"]
