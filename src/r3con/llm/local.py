"""Local OpenAI-compatible servers: found on their usual ports, told apart, their models and real windows read.

With no `--base-url` the CLI looks here (`find_servers`). A port that nothing listens on refuses the
connection at once, so looking costs milliseconds when no server runs. A server is told apart by
`/v1/models` (`owned_by`: llamacpp, vllm, sglang; llama.cpp's `meta`), Ollama's `/api/version` and
LM Studio's `/api/v1/models` or `/api/v0/models`; Ollama's and LM Studio's models and windows come
from their own APIs (`native.py`), the others' from `window.window_of`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .endpoint import Endpoint
from .native import ASK_S, LocalModel, ask, lmstudio_models, ollama_models, same_model
from .window import window_of

PORTS: tuple[tuple[int, str], ...] = (
    (11434, "Ollama"), (8080, "llama.cpp"), (8000, "vLLM"), (30000, "SGLang"), (1234, "LM Studio"),
)
ROOMY = 32768  # a window this large needs no advice on raising it
CONNECT_S = 0.3  # a local port that does not accept within this is taken as closed
RAISE_OLLAMA = f"raise it with OLLAMA_CONTEXT_LENGTH={ROOMY} ollama serve (or PARAMETER num_ctx in a Modelfile)"
_OWNERS = {"llamacpp": "llama.cpp", "vllm": "vLLM", "sglang": "SGLang"}


@dataclass(frozen=True)
class LocalServer:
    """A server found on a local port: what it is, its OpenAI base URL and its models."""

    kind: str  # "Ollama", "llama.cpp", "vLLM", "SGLang", "LM Studio", or "OpenAI-compatible server"
    port: int
    base_url: str
    models: tuple[LocalModel, ...]

    def chosen(self) -> LocalModel | None:
        """The model to use without --model: the only one, else the only loaded one; None when that is ambiguous."""
        if len(self.models) == 1:
            return self.models[0]
        loaded = [m for m in self.models if m.loaded]
        return loaded[0] if len(loaded) == 1 else None

    def model(self, name: str) -> LocalModel | None:
        return next((m for m in self.models if same_model(m.id, name)), None)


def window_hint(server: LocalServer, model: LocalModel) -> str:
    """How to give the model a larger window, where the server needs telling and the window is under 32,768
    tokens ("" otherwise)."""
    if model.window and model.window >= ROOMY:
        return ""
    if server.kind == "Ollama":
        return RAISE_OLLAMA
    if server.kind == "LM Studio":
        return f"raise it with lms load {model.id} --context-length {ROOMY} (or in the model's load settings)"
    return ""


async def find_servers(ports: Sequence[tuple[int, str]] = PORTS, host: str = "127.0.0.1") -> tuple[LocalServer, ...]:
    """The OpenAI-compatible servers listening on `ports` of `host`, in the order of `ports`."""
    listening = await asyncio.gather(*(_listens(host, port) for port, _ in ports))
    found = await asyncio.gather(*(describe(f"http://{host}:{port}/v1", port, usual)
                                   for (port, usual), up in zip(ports, listening, strict=True) if up))
    return tuple(server for server in found if server is not None)


async def describe(base_url: str, port: int = 0, usual: str = "") -> LocalServer | None:
    """What the server at `base_url` is and serves; None when it is no OpenAI-compatible server."""
    endpoint = Endpoint(base_url, timeout_s=ASK_S)
    try:
        listed = await ask(endpoint, "GET", "/models")
        if not isinstance(listed, dict) or not isinstance(listed.get("data"), list):
            return None
        entries = [m for m in listed["data"] if isinstance(m, dict) and m.get("id")]
        kind = await _kind(endpoint, entries)
        if kind == "Ollama":
            models = await ollama_models(endpoint, entries)
        elif kind == "LM Studio":
            models = await lmstudio_models(endpoint, entries)
        else:
            models = []
            for entry in entries:
                found = await window_of(endpoint, str(entry["id"]), entry)
                models.append(LocalModel(str(entry["id"]), None, *(found or (None, ""))))
        return LocalServer(kind, port, base_url, tuple(models))
    finally:
        await endpoint.aclose()


async def _kind(endpoint: Endpoint, entries: list[dict[str, Any]]) -> str:
    owners = {str(e.get("owned_by")) for e in entries}
    for owner, kind in _OWNERS.items():
        if owner in owners:
            return kind
    if any(isinstance(e.get("meta"), dict) for e in entries):
        return "llama.cpp"
    if isinstance(await ask(endpoint, "GET", "//api/version"), dict):
        return "Ollama"
    v1 = await ask(endpoint, "GET", "//api/v1/models")
    if (isinstance(v1, dict) and isinstance(v1.get("models"), list)) or isinstance(
            await ask(endpoint, "GET", "//api/v0/models"), dict):
        return "LM Studio"
    return "OpenAI-compatible server"


async def _listens(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_S)
    except (OSError, TimeoutError):
        return False
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return True


