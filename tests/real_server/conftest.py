"""A real llama.cpp server for the real-server tier: started once per session from ../shared/llama.cpp.

`-c 32768 -np 4` gives four slots of 8,192 tokens each, as many users run it; `-t 2` keeps it to two
threads. The model is a tiny one with random weights and the Qwen2 tokenizer whose replies end by
themselves after about 100 tokens, so its replies are noise: the tier tests the protocol and robustness.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import free_port


def _llama_dir() -> Path:
    """R3CON_LLAMA_CPP, else the first `shared/llama.cpp` beside the checkout or a folder above it."""
    if os.environ.get("R3CON_LLAMA_CPP"):
        return Path(os.environ["R3CON_LLAMA_CPP"])
    root = Path(__file__).resolve().parents[2]
    for parent in root.parents:
        if (parent / "shared" / "llama.cpp").is_dir():
            return parent / "shared" / "llama.cpp"
    return root.parent / "shared" / "llama.cpp"


LLAMA = _llama_dir()
SERVER = LLAMA / "llama-server"
MODEL = LLAMA / "tiny-random-qwen2-short.gguf"
SLOT_TOKENS = 8192


NEVER_ENDING = LLAMA / "tiny-random-qwen2.gguf"  # its replies run to max_tokens, as a rambling model's can


def need_server(model: Path = MODEL) -> None:
    """Skip the test when the llama.cpp server or the model is absent."""
    if not SERVER.is_file() or not model.is_file():
        pytest.skip(f"no llama.cpp server at {SERVER} (with {model.name}); set R3CON_LLAMA_CPP to its folder "
                    "to run the real-server tier")


class Llama:
    """One llama-server process on `port`: `start()` returns at once (it answers 503 "Loading model"
    until ready), `wait_ready()`, `stop()`; the same port can be started again (a restart)."""

    def __init__(self, log: Path, *args: str, port: int | None = None, model: Path = MODEL):
        need_server(model)
        self.port = port or free_port()
        self.args = [str(SERVER), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port), "-t", "2",
                     "--seed", "1", *args]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Llama:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
        return self

    def health(self) -> int | None:
        """/health's status: 200 ready, 503 loading, None when nothing answers."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except OSError:
            return None

    def wait_ready(self, seconds: float = 90) -> Llama:
        deadline = time.monotonic() + seconds
        while self.health() != 200:
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail(f"llama-server exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"llama-server did not become ready in {seconds:g} s: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        return self

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        self.proc.kill() if kill else self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> Llama:
        return self.start().wait_ready()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (…/v1) of a running llama-server; the tier is skipped when the binary is absent."""
    with Llama(tmp_path_factory.mktemp("llama") / "server.log", "-c", "32768", "-np", "4") as server:
        yield server.url
