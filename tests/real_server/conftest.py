"""A real llama.cpp server for the real-server tier: started once per session from ../shared/llama.cpp.

`-c 32768 -np 4` gives four slots of 8,192 tokens each, as many users run it; `-t 2` keeps it to two
threads. The model is a tiny one with random weights and the Qwen2 tokenizer whose replies end by
themselves after about 100 tokens, so its replies are noise: the tier tests the protocol and robustness.
"""

from __future__ import annotations

import os
import subprocess
import time
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


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (…/v1) of a running llama-server; the tier is skipped when the binary is absent."""
    if not SERVER.is_file() or not MODEL.is_file():
        pytest.skip(f"no llama.cpp server at {SERVER} (with {MODEL.name}); set R3CON_LLAMA_CPP to its folder "
                    "to run the real-server tier")
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(SERVER), "-m", str(MODEL), "--host", "127.0.0.1", "--port", str(port),
                                 "-c", "32768", "-np", "4", "-t", "2", "--seed", "1"],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama-server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama-server did not become ready in 60 s: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
