import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from r3con.testing import FakeLLMServer

from .fakes import FIXTURE_DATA, data_dir


@pytest.fixture(autouse=True)
def _private_llm_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test (and every `r3con` it starts) gets its own LLM cache, never the developer's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture
def fake_server() -> Iterator[FakeLLMServer]:
    """The scripted OpenAI-compatible server, in this process, on a free port."""
    with FakeLLMServer(port=0) as server:
        yield server


@pytest.fixture
def shared_data() -> Path:
    """The real data folder (whole corpora), or skip: for the tests that need every document."""
    path = data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path}; set R3CON_DATA")
    return path


@pytest.fixture
def benchmark_root() -> Path:
    """The real data folder when it is here, else the committed slices (tests/fixtures/data)."""
    return data_dir() if data_dir().is_dir() else FIXTURE_DATA


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No R3CON_* or OPENAI_* variable of the developer's shell leaks into a test."""
    for name in list(os.environ):
        if name.startswith(("R3CON_", "OPENAI_")):
            monkeypatch.delenv(name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def r3con_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None):
    """Run the installed `r3con` command as a user would, in a subprocess."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", "r3con", *args], capture_output=True, text=True,
                          env=base, timeout=timeout, cwd=cwd)
