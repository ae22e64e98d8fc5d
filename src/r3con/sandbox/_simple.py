"""The coding agent's REPL: a persistent Python worker in its own OS process.

Limits here: a separate process in its own process group, killed as a group when a cell passes its
wall-clock timeout (then restarted with the data rebound), an address-space cap (RLIMIT_AS), a CPU-time
cap, an environment built from scratch (no API keys or tokens), and an empty scratch directory as
working directory. Network, uid and filesystem isolation are reported as off (see IsolationReport).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import SandboxError


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 30.0
    memory_mb: int = 2048
    cpu_s: int = 120
    output_chars: int = 20_000


@dataclass(frozen=True)
class CellResult:
    stdout: str
    stderr: str
    error: str | None
    duration_s: float
    timed_out: bool = False
    crashed: bool = False
    restarted: bool = False
    has_final_answer: bool = False
    final_answer: Any = None

    def observation(self) -> str:
        """What the agent sees after this cell."""
        parts = []
        if self.stdout:
            parts.append(self.stdout.rstrip())
        if self.stderr:
            parts.append("[stderr]\n" + self.stderr.rstrip())
        if self.error:
            parts.append("[error]\n" + self.error.rstrip())
        if self.timed_out:
            parts.append(f"[the cell ran past its time limit ({self.duration_s:.0f}s) and was stopped]")
        elif self.crashed:
            parts.append("[the Python process crashed (for example out of memory)]")
        if self.restarted:
            parts.append("[the REPL was restarted: the data is loaded again, your own variables are gone]")
        if self.has_final_answer:
            parts.append(f"[final_answer: {json.dumps(self.final_answer, ensure_ascii=False, default=str)[:500]}]")
        return "\n".join(parts) if parts else "[no output]"


@dataclass(frozen=True)
class IsolationReport:
    layers: Mapping[str, str] = field(default_factory=dict)

    def missing(self) -> list[str]:
        return [name for name, state in self.layers.items() if not state.startswith("on")]

    def to_dict(self) -> dict[str, str]:
        return dict(self.layers)


_LAYERS = {
    "process": "on",
    "rlimits": "on",
    "env": "on",
    "scratch_dir": "on",
    "no_network": "off: not applied by this worker",
    "unprivileged_uid": "off: not applied by this worker",
}


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


class Sandbox:
    """A persistent worker process; `run(code)` never raises for anything the code did."""

    def __init__(self, *, variables: Mapping[str, Any] | None = None,
                 dataframes: Mapping[str, list[dict[str, Any]]] | None = None,
                 limits: SandboxLimits = SandboxLimits(), mode: Literal["best", "strict"] = "best",
                 scratch_root: Path | None = None):
        self.limits = limits
        self.mode = mode
        self._init = json.dumps({"variables": dict(variables or {}), "dataframes": dict(dataframes or {})},
                                ensure_ascii=False, default=str)
        self._scratch_root = scratch_root
        self._scratch: Path | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    @property
    def isolation(self) -> IsolationReport:
        return IsolationReport(_LAYERS)

    async def __aenter__(self) -> Sandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        report = self.isolation
        if self.mode == "strict" and report.missing():
            raise SandboxError(f"--sandbox strict: isolation layers unavailable: {', '.join(report.missing())}; "
                               "use --sandbox best")
        if self._scratch_root is not None:
            self._scratch_root.mkdir(parents=True, exist_ok=True)
        self._scratch = Path(tempfile.mkdtemp(prefix="cell-", dir=self._scratch_root))
        (self._scratch / ".init.json").write_text(self._init, encoding="utf-8")
        await self._spawn()

    async def _spawn(self) -> None:
        if self._scratch is None:
            raise SandboxError("the sandbox was not started; use `async with Sandbox(...)`")
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self._scratch),
               "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1"}
        for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
            if name in os.environ:
                env[name] = os.environ[name]
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-m", "r3con.sandbox._repl", str(self.limits.memory_mb), str(self.limits.cpu_s),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            cwd=self._scratch, env=env, start_new_session=True, limit=2**26,
        )
        ready = await self._read(timeout=60)
        if not ready or not ready.get("ready"):
            raise SandboxError(f"the sandbox worker did not start ({ready}); check that pandas is installed")

    async def _read(self, timeout: float) -> dict[str, Any] | None:
        if self._proc is None or self._proc.stdout is None:
            return None
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), timeout)
        except (TimeoutError, ValueError):
            return None
        if not line:
            return None
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    async def _kill(self) -> None:
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        await self._proc.wait()
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc = None

    async def run(self, code: str) -> CellResult:
        async with self._lock:
            if self._proc is None:
                await self._spawn()
            if self._proc is None or self._proc.stdin is None:
                raise SandboxError("the sandbox worker is not running")
            started = time.monotonic()
            try:
                self._proc.stdin.write((json.dumps({"code": code}) + "\n").encode())
                await self._proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass
            reply = await self._read(timeout=self.limits.timeout_s)
            duration = time.monotonic() - started
            if reply is None:
                timed_out = self._proc.returncode is None and duration >= self.limits.timeout_s - 0.05
                await self._kill()
                await self._spawn()
                return CellResult("", "", None, duration, timed_out=timed_out, crashed=not timed_out, restarted=True)
            limit = self.limits.output_chars
            return CellResult(
                stdout=_clip(reply.get("stdout", ""), limit), stderr=_clip(reply.get("stderr", ""), limit),
                error=reply.get("error"), duration_s=duration, has_final_answer=bool(reply.get("has_final")),
                final_answer=reply.get("final"),
            )

    async def close(self) -> None:
        await self._kill()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
