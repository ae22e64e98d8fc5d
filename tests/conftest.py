import io
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from r3con.cli import main
from r3con.testing import FakeLLMServer

from .fakes import FIXTURE_DATA, data_dir

NO_LOCAL_SERVERS = {"R3CON_LOCAL_PORTS": ""}  # a test never finds the servers others run on the usual ports


@pytest.fixture(autouse=True)
def _private_llm_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test (and every `r3con` it starts) gets its own LLM cache, never the developer's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.setenv("R3CON_LOCAL_PORTS", "")


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
    monkeypatch.setenv("R3CON_LOCAL_PORTS", "")  # and no server another engineer runs on a usual port


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def r3con_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None):
    """Run the installed `r3con` command as a user would, in a subprocess: for what only a real process
    shows (signals, the interpreter's own exit, a server that runs until stopped)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    base.update({**NO_LOCAL_SERVERS, **(env or {})})
    return subprocess.run([sys.executable, "-m", "r3con", *args], capture_output=True, text=True,
                          env=base, timeout=timeout, cwd=cwd)


def cli_in_process(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, stdin: str = "",
                   timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """`r3con ARGS` through the command's own entry point in this process: the exit code, stdout and stderr a
    subprocess would give, without starting Python again. Environment, argv, stdin and cwd are restored."""
    saved = (dict(os.environ), sys.argv, sys.stdin, os.getcwd())
    out, err, code = io.StringIO(), io.StringIO(), 0
    try:
        for name in [n for n in os.environ if n.startswith(("R3CON_", "OPENAI_"))]:
            del os.environ[name]
        os.environ.update({**NO_LOCAL_SERVERS, **(env or {})})
        sys.argv, sys.stdin = ["r3con", *args], io.StringIO(stdin)
        if cwd is not None:
            os.chdir(cwd)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                if isinstance(exc.code, str):
                    err.write(exc.code + "\n")
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        sys.argv, sys.stdin = saved[1], saved[2]
        os.chdir(saved[3])
    return subprocess.CompletedProcess(["r3con", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `r3con ARGS` in this process (see `cli_in_process`)."""
    return cli_in_process
