"""The sandbox's plain data: limits, the result of a cell, the isolation report."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from ..errors import SandboxError

# Every layer the sandbox tries to apply, in the order the report lists them.
LAYERS = (
    "process",           # a separate OS process in its own session; the parent kills its process group
    "env",               # an environment built from scratch: no variable of the parent reaches it
    "scratch_dir",       # an empty private directory as cwd, HOME and TMPDIR
    "rlimits",           # address space, CPU time, processes, file size, open files; hard limits too
    "no_network",        # a new network namespace with nothing but a down loopback
    "pid_namespace",     # the worker is PID 1 of its own namespace: it sees only its processes, and
                         # everything it started dies with it
    "ipc_namespace",     # no System V IPC or POSIX message queues shared with the host
    "readonly_fs",       # a private mount namespace whose root holds only the system and Python
                         # directories, read-only, plus the scratch dir
    "unprivileged_uid",  # uid/gid of its own, no groups, no capabilities, no way back to root
    "no_new_privs",      # PR_SET_NO_NEW_PRIVS, not dumpable (no ptrace, no /proc peeking), empty
                         # capability bounding set
)
# How stderr and error messages name each layer.
LAYER_WORDS = {
    "process": "process isolation", "env": "clean environment", "scratch_dir": "scratch directory",
    "rlimits": "resource limits", "no_network": "network isolation", "pid_namespace": "PID namespace",
    "ipc_namespace": "IPC namespace", "readonly_fs": "read-only file system", "unprivileged_uid": "unprivileged uid",
    "no_new_privs": "no-new-privileges",
}
# Layers a caller may leave out on purpose (benchmarks, tests); the others are what makes it a sandbox.
OPTIONAL_LAYERS = frozenset(LAYERS) - {"process", "env", "scratch_dir"}


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandbox may use; the OS enforces each limit, none relies on the code's cooperation."""

    timeout_s: float = 30.0      # wall clock per cell (host function calls not counted); then the worker is killed
    memory_mb: int = 2048        # address space of the worker (RLIMIT_AS)
    cpu_s: int = 300             # CPU seconds per process of the worker's life (RLIMIT_CPU); a restart renews it
    max_processes: int = 64      # processes and threads of the sandbox uid (RLIMIT_NPROC)
    file_size_mb: int = 64       # largest file the code may write (RLIMIT_FSIZE)
    open_files: int = 256        # open file descriptors (RLIMIT_NOFILE)
    output_chars: int = 20_000   # stdout and stderr are each cut to this many characters, head and tail kept

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise SandboxError(f"SandboxLimits.{field.name} must be a positive number, not {value!r}")
        if self.output_chars < 100:
            raise SandboxError("SandboxLimits.output_chars must be at least 100")

    def rlimits(self) -> dict[str, int]:
        return {"memory_mb": self.memory_mb, "cpu_s": self.cpu_s, "max_processes": self.max_processes,
                "file_size_mb": self.file_size_mb, "open_files": self.open_files}


@dataclass(frozen=True)
class CellResult:
    """What running one cell produced."""

    stdout: str
    stderr: str
    error: str | None          # formatted exception (last frames only), or what stopped the cell
    duration_s: float
    timed_out: bool = False
    crashed: bool = False      # the worker died (memory, segfault, os._exit, a signal ...)
    restarted: bool = False    # a fresh worker replaced it: data bound again, the code's variables gone
    has_final_answer: bool = False
    final_answer: Any = None   # the JSON-compatible value given to final_answer()
    citations: tuple[str, ...] = ()  # final_answer(..., cite=[...]): the record ids or documents it rests on

    def observation(self) -> str:
        """The text the agent sees next: output, error, and what happened to the session."""
        parts: list[str] = []
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append("[stderr]\n" + self.stderr.rstrip("\n"))
        if self.error:
            parts.append(self.error.rstrip("\n"))
        if self.restarted:
            parts.append("[The Python session was restarted: variables defined in earlier cells are gone; "
                         "the original data is bound again.]")
        if self.has_final_answer:
            shown = json.dumps(self.final_answer, ensure_ascii=False, default=str)
            parts.append(f"[final_answer recorded: {shown if len(shown) <= 500 else shown[:500] + ' ...'}]")
        return "\n".join(parts) if parts else "(the cell ran and printed nothing)"


@dataclass(frozen=True)
class IsolationReport:
    """Which isolation layers are in force: name -> "on" or "off: <reason>"."""

    layers: Mapping[str, str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", MappingProxyType(dict(self.layers)))

    def missing(self) -> list[str]:
        """Names of the layers that are not on."""
        return [name for name, state in self.layers.items() if state != "on"]

    def to_dict(self) -> dict[str, Any]:
        return {"layers": dict(self.layers), "missing": self.missing()}

    def describe_missing(self, names: Sequence[str] | None = None) -> str:
        """One line on the layers that are off (all of them, or `names`) and why."""
        names = self.missing() if names is None else names
        by_reason: dict[str, list[str]] = {}
        for name in names:
            by_reason.setdefault(self.layers[name].removeprefix("off: "), []).append(LAYER_WORDS.get(name, name))
        return "; ".join(f"{', '.join(words)} off ({reason})" for reason, words in by_reason.items())
