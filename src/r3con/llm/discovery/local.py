"""Local OpenAI-compatible servers: found on their usual ports, told apart, their models and real windows read.

With no `--base-url` (nor a pool file) the CLI and `Settings.resolve()` look here, through the same
`use_local_server`, on the ports `local_ports` gives. A port that nothing listens on refuses the
connection at once, so looking is quick when no server runs. A server is told apart by
`/v1/models` (`owned_by`: llamacpp, vllm, sglang; llama.cpp's `meta`), Ollama's `/api/version` and
LM Studio's `/api/v1/models` or `/api/v0/models`; Ollama's and LM Studio's models and windows come
from their own APIs (`native.py`), the others' from `window.window_of`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError
from ..transport.endpoint import Endpoint
from .native import ASK_S, LocalModel, ask, lmstudio_models, ollama_models, same_model
from .served import window_of

if TYPE_CHECKING:
    from ...config import Settings

PORTS: tuple[tuple[int, str], ...] = (
    (11434, "Ollama"), (8080, "llama.cpp"), (8000, "vLLM"), (30000, "SGLang"), (1234, "LM Studio"),
)
ROOMY = 32768  # a window this large needs no advice on raising it
CONNECT_S = 0.3  # a local port that does not accept within this is taken as closed
RAISE_OLLAMA = f"raise it with OLLAMA_CONTEXT_LENGTH={ROOMY} ollama serve (or PARAMETER num_ctx in a Modelfile)"
_OWNERS = {"llamacpp": "llama.cpp", "vllm": "vLLM", "sglang": "SGLang"}
HOW = "start one (Ollama, llama.cpp, vLLM, SGLang, LM Studio), or set OPENAI_BASE_URL or pass --base-url"


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




def local_ports(env: Mapping[str, str] | None = None) -> tuple[tuple[int, str], ...]:
    """The ports to look on: R3CON_LOCAL_PORTS ("8080,11434=Ollama"; empty: none) or the usual ones."""
    env = os.environ if env is None else env
    raw = env.get("R3CON_LOCAL_PORTS")
    if raw is None:
        return PORTS
    ports = []
    for item in filter(None, (i.strip() for i in raw.split(","))):
        port, _, kind = item.partition("=")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"R3CON_LOCAL_PORTS={raw!r}: {item!r} is no port; give PORT or PORT=NAME, "
                              "separated by commas")
        ports.append((int(port), kind.strip() or "a server"))
    return tuple(ports)


def use_local_server(settings: Settings, ports: Sequence[tuple[int, str]], *, required: bool = True
                     ) -> tuple[Settings, LocalServer | None, LocalModel | None]:
    """`settings` with the base URL and model of the one local server listening on `ports`, and what was
    found; `settings` unchanged (and None, None) when they name an endpoint or a pool file.

    ConfigError when several servers answer, or the server offers several models and none is chosen
    (`settings.model`) or alone loaded; when none answers, ConfigError if `required`, else `settings`
    unchanged. Callable from a running event loop (the look-up then runs in a thread of its own).
    """
    if settings.base_url or settings.pool_file is not None:
        return settings, None, None
    if not ports and required:
        settings.require_endpoint()
    servers = _look(ports) if ports else ()
    if not servers and not required:
        return settings, None, None
    if not servers:
        looked = ", ".join(f"{port} ({kind})" for port, kind in ports)
        raise ConfigError(f"no endpoint configured and no local server answers on ports {looked}: {HOW}")
    if len(servers) > 1:
        found = "; ".join(f"{s.kind} at {s.base_url}" for s in servers)
        raise ConfigError(f"{len(servers)} local servers answer ({found}): pass the one to use with --base-url")
    server = servers[0]
    if not server.models:
        raise ConfigError(f"{server.kind} at {server.base_url} serves no model: load one, or pass --base-url")
    chosen = server.model(settings.model) if settings.model else server.chosen()
    if chosen is None and settings.model:
        raise ConfigError(f"{server.kind} at {server.base_url} does not serve the model {settings.model}; "
                          f"it serves {model_names(server.models)}: pass one of them with --model")
    if chosen is None:
        raise ConfigError(f"{server.kind} at {server.base_url} serves {len(server.models)} models "
                          f"({model_names(server.models)}) and none alone is loaded: pass one with --model")
    return dataclasses.replace(settings, base_url=server.base_url, model=chosen.id), server, chosen


def model_names(models: Sequence[LocalModel], limit: int = 12) -> str:
    names = [m.id + (" (loaded)" if m.loaded else "") for m in models]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _look(ports: Sequence[tuple[int, str]]) -> tuple[LocalServer, ...]:
    """`find_servers(ports)` from synchronous code, in or out of a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(find_servers(ports))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # asyncio.run cannot nest in a running loop
        return pool.submit(asyncio.run, find_servers(ports)).result()
