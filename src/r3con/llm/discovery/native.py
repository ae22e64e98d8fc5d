"""What Ollama and LM Studio report about the models they serve, from their own APIs.

- Ollama: `/api/ps` lists the loaded models with the `context_length` each runs with (far below the
  trained context unless raised: `OLLAMA_CONTEXT_LENGTH`, or `num_ctx` in a Modelfile), and its
  OpenAI API cuts a longer prompt silently; `/api/show` `parameters` holds a Modelfile's `num_ctx`.
- LM Studio: `/api/v1/models` (0.4+) lists `loaded_instances[].config.context_length`;
  `/api/v0/models` (0.3.6+) has `state` and `max_context_length`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...errors import ProviderError
from ..transport.endpoint import Endpoint, HTTPFailure

ASK_S = 3.0  # seconds one question to a server may take
OLLAMA_DEFAULT = 4096  # what Ollama runs a model with when nothing raised it (docs.ollama.com/context-length)
DEFAULT_SOURCE = "Ollama's default num_ctx (not loaded yet, so not asked)"


@dataclass(frozen=True)
class LocalModel:
    """One model a local server offers: whether it is loaded (None: the server does not say) and its window."""

    id: str
    loaded: bool | None = None
    window: int | None = None
    window_source: str = ""  # where the window came from, e.g. "Ollama /api/ps context_length"


def same_model(served: str, name: str) -> bool:
    """Whether `name` names the served model id (Ollama takes "llama3.2" for "llama3.2:latest", Gemini
    "gemini-2.5-flash" for "models/gemini-2.5-flash")."""
    def bare(n: str) -> str:
        return n.removeprefix("models/").removesuffix(":latest")
    return served == name or bare(served) == bare(name)


async def native_window(endpoint: Endpoint, model: str) -> tuple[int, str] | None:
    """The window Ollama or LM Studio runs `model` with, from its own API; None for other servers."""
    ps = await ask(endpoint, "GET", "//api/ps")
    if _running(ps) is not None:
        found = (await ollama_models(endpoint, [{"id": model}], ps))[0]
        return (found.window, f"server: {found.window_source}") if found.window else None
    shown = await _ollama_show(endpoint, model)  # an Ollama older than /api/ps
    if shown is not None:
        return shown[0], f"server: {shown[1]}"
    for m in await lmstudio_models(endpoint, [{"id": model}]):
        if same_model(m.id, model) and m.window:
            return m.window, f"server: {m.window_source}"
    return None


async def ollama_models(endpoint: Endpoint, entries: list[dict[str, Any]], ps: object = None) -> list[LocalModel]:
    """Ollama's models with the window each runs with (`/api/ps`), or would run with once loaded."""
    running = _running(ps if ps is not None else await ask(endpoint, "GET", "//api/ps")) or {}
    models = []
    for entry in entries:
        name = str(entry["id"])
        served = next((s for s in running if same_model(s, name)), None)
        window, source = (running.get(served), "Ollama /api/ps context_length") if served else (None, "")
        if window is None:
            window, source = await _ollama_show(endpoint, name) or (OLLAMA_DEFAULT, DEFAULT_SOURCE)
        models.append(LocalModel(name, served is not None, window, source))
    return models


def _running(ps: object) -> dict[str, int | None] | None:
    """{model: the context length it runs with} from Ollama's /api/ps; None when `ps` is no such reply."""
    if not isinstance(ps, dict) or not isinstance(ps.get("models"), list):
        return None
    return {str(m.get("model") or m.get("name")): _int(m.get("context_length"))
            for m in ps["models"] if isinstance(m, dict) and (m.get("model") or m.get("name"))}


async def _ollama_show(endpoint: Endpoint, model: str) -> tuple[int, str] | None:
    """A Modelfile's num_ctx (`/api/show`), else Ollama's default; None when the server is not Ollama."""
    shown = await ask(endpoint, "POST", "//api/show", body={"model": model})
    if not isinstance(shown, dict) or not ("modelfile" in shown or "model_info" in shown):
        return None
    match = re.search(r"^num_ctx\s+(\d+)", str(shown.get("parameters") or ""), re.MULTILINE)
    if match:
        return int(match.group(1)), "Ollama /api/show num_ctx"
    return OLLAMA_DEFAULT, DEFAULT_SOURCE


async def lmstudio_models(endpoint: Endpoint, entries: list[dict[str, Any]]) -> list[LocalModel]:
    """LM Studio's models with the context length each is loaded with (v1 API, else v0)."""
    v1 = await ask(endpoint, "GET", "//api/v1/models")
    native: dict[str, tuple[bool, int | None, str]] = {}
    if isinstance(v1, dict) and isinstance(v1.get("models"), list):
        for m in v1["models"]:
            if not isinstance(m, dict) or not m.get("key") or m.get("type") == "embedding":
                continue
            instances = [i for i in m.get("loaded_instances") or [] if isinstance(i, dict)]
            config = instances[0].get("config") if instances else None
            window = _int(config.get("context_length")) if isinstance(config, dict) else None
            source = "LM Studio /api/v1/models loaded context_length"
            if window is None:
                window, source = _int(m.get("max_context_length")), "LM Studio max_context_length (not loaded)"
            native[str(m["key"])] = (bool(instances), window, source)
    else:
        v0 = await ask(endpoint, "GET", "//api/v0/models")
        for m in (v0.get("data") or []) if isinstance(v0, dict) else []:
            if not isinstance(m, dict) or not m.get("id") or m.get("type") in ("embeddings", "embedding"):
                continue
            loaded = m.get("state") == "loaded"
            window, source = _int(m.get("loaded_context_length")), "LM Studio /api/v0/models loaded_context_length"
            if window is None:
                window = _int(m.get("max_context_length"))
                source = "LM Studio max_context_length (" + ("its loaded length unreported)" if loaded else "not loaded)")
            native[str(m["id"])] = (loaded, window, source)
    ids = [str(e["id"]) for e in entries if not str(e["id"]).startswith("text-embedding")]
    names = [n for n in ids if n in native] or ids
    return [LocalModel(n, *native.get(n, (None, None, ""))) for n in names]


async def ask(endpoint: Endpoint, method: str, path: str, body: Any = None) -> object:
    """One question whose failure only means "not this kind of server": the reply's JSON, or None."""
    try:
        return await endpoint.call(method, path, body=body, timeout_s=ASK_S)
    except (HTTPFailure, ProviderError):
        return None


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
