"""The router tier: the real routers from PyPI (`vllm-router`, `sglang-router`) in front of real llama.cpp servers.

The binaries are looked for in $R3CON_ROUTER_BIN (a folder; `.ci/run` installs both packages into
.venv-routers and points it there), then on PATH, then beside this Python. Where one is absent its
tests are skipped, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from ..conftest import free_port
from ..real_server.servers import Process, llama_servers

PACKAGES = {"vllm-router": "vllm-router", "sglang-router": "sglang-router"}
ROUTER_BIN = os.environ.get("R3CON_ROUTER_BIN", "")  # read before the tests' clean environment


def router_binary(name: str) -> Path | None:
    """The router's executable, or None."""
    folders = [ROUTER_BIN, str(Path(__file__).resolve().parents[2] / ".venv-routers" / "bin")]
    for folder in filter(None, folders):
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    found = shutil.which(name)
    if found:
        return Path(found)
    beside = Path(sys.executable).parent / name
    return beside if beside.is_file() else None


def router_args(name: str, binary: Path, port: int, workers: list[str], policy: str) -> list[str]:
    """The command line of router `name` on `port` in front of `workers` with `policy`; its metrics on a free port."""
    common = ["--host", "127.0.0.1", "--port", str(port), "--worker-urls", *workers, "--policy", policy,
              "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
              "--log-level", "warn" if name == "sglang-router" else "warning"]
    return [str(binary), "launch", *common] if name == "sglang-router" else [str(binary), *common]


@contextmanager
def _routed(name: str, policy: str, folder: Path, workers: int) -> Iterator[tuple[Process, list[Process]]]:
    binary = router_binary(name)
    if binary is None:
        pytest.skip(f"{name} is not installed; `pip install {PACKAGES[name]}` (or set R3CON_ROUTER_BIN) to run "
                    "the router tier")
    with ExitStack() as stack:
        servers = stack.enter_context(llama_servers(workers, folder, extra=["--metrics"]))
        port = free_port()
        router = Process(router_args(name, binary, port, [s.root for s in servers], policy), port,
                         folder / f"{name}.log", "/health")
        stack.callback(router.stop)
        _wait_for_workers(router, len(servers))
        yield router, servers


def _wait_for_workers(router: Process, n: int) -> None:
    """Until the router lists its `n` workers as healthy: it answers /health before it has registered them."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{router.root}/workers", timeout=2) as reply:
                listed = json.loads(reply.read()).get("workers") or []
            if sum(1 for w in listed if w.get("is_healthy", True)) >= n:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    pytest.fail(f"the router did not list its {n} workers in 60 s: {router.log.read_text(errors='replace')[-2000:]}")


@pytest.fixture
def routed(tmp_path: Path) -> Callable[..., object]:
    """`with routed(name, policy, workers=2) as (router, servers):` a router in front of llama-server processes."""
    def start(name: str, policy: str, workers: int = 2):
        return _routed(name, policy, tmp_path, workers)
    return start
