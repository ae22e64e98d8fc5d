"""Start and stop real llama.cpp servers (and the processes in front of them) for the pool and router tiers."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from ..conftest import free_port
from .conftest import MODEL, SERVER


def require_llama() -> None:
    if not SERVER.is_file() or not MODEL.is_file():
        pytest.skip(f"no llama.cpp server at {SERVER} (with {MODEL.name}); set R3CON_LLAMA_CPP to its folder")


class Process:
    """A started server: its port, its process (in a session of its own, so its children stop with it), its log."""

    def __init__(self, args: Sequence[str], port: int, log: Path, ready: str):
        self.port, self.log = port, log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(list(args), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"{args[0]} exited with {self.proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{ready}", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"{args[0]} was not ready in 60 s: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL, as a machine that dies: no reply to the calls in flight."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def llama_servers(n: int, folder: Path, *, slots: int = 4, extra: Sequence[str] = ()) -> Iterator[list[Process]]:
    """`n` llama-server processes on free ports, one thread each, `slots` slots of 8,192 tokens; `extra` options."""
    require_llama()
    started: list[Process] = []
    try:
        for i in range(n):
            port = free_port()
            started.append(Process([str(SERVER), "-m", str(MODEL), "--host", "127.0.0.1", "--port", str(port),
                                    "-c", str(8192 * slots), "-np", str(slots), "-t", "1", "--seed", "1", *extra],
                                   port, folder / f"llama-{i}.log", "/health"))
        yield started
    finally:
        for server in started:
            server.stop()
