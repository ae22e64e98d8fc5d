"""What one request may hold: the model's per-request context window, read where each server reports it.

A server can serve less than the model was trained for: `llama-server -c 32768 -np 4` gives each of
its four slots 8,192 tokens while `/v1/models` says `n_ctx_train` 32,768. In order:

1. `--context-window` (configuration wins);
2. `/v1/models`: vLLM and SGLang's `max_model_len`, OpenRouter's `context_length`;
3. llama.cpp's `/props`: `default_generation_settings.n_ctx` (one slot), or `/v1/models` `meta.n_ctx`;
4. Ollama's `/api/ps`: the `context_length` a loaded model runs with; else `/api/show`'s `num_ctx`, else
   Ollama's default of 4,096 (it does not serve the trained context unless told to); LM Studio's loaded
   context length (`llm/discovery/local.py`);
5. OpenAI's models by name (`KNOWN`);
6. `meta.n_ctx_train` (the trained context), else `DEFAULT_CONTEXT_WINDOW`.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from ...config import DEFAULT_CONTEXT_WINDOW, Settings
from ...errors import ConfigError, EndpointUnreachable, ProviderError
from ..transport.endpoint import Endpoint, HTTPFailure
from .native import native_window, same_model

PROBE_S = 10.0  # seconds a discovery probe may take; a server that does not answer one is asked no more

KNOWN: tuple[tuple[str, int], ...] = (  # prefixes of OpenAI model names, longest first; input tokens
    ("gpt-4.1", 1_047_576), ("gpt-5", 272_000), ("gpt-4o", 128_000), ("gpt-4-turbo", 128_000),
    ("o4-mini", 200_000), ("o3", 200_000), ("o1", 200_000), ("gpt-4", 8_192), ("gpt-3.5-turbo", 16_385),
)


@dataclass(frozen=True)
class EndpointInfo:
    """What the endpoint told us about itself (or what configuration says)."""

    base_url: str
    model: str
    context_window: int
    context_window_source: str  # "config", "server" (with how: "server: /props n_ctx"), "known", or "default"


async def discover(endpoint: Endpoint, settings: Settings) -> EndpointInfo:
    """The model (the first one served when none is configured) and the per-request window."""
    model, window = settings.model, settings.context_window
    if model is not None and window is not None:
        return EndpointInfo(endpoint.base_url, model, window, "config")
    listed = await _list_models(endpoint, model)
    if model is None:
        if not listed:
            raise ConfigError(f"{endpoint.base_url} lists no model; pass --model or set R3CON_MODEL")
        model = str(listed[0].get("id"))
    check_served([model, *settings.stage_models.values()], listed, endpoint.base_url)
    if window is not None:
        return EndpointInfo(endpoint.base_url, model, window, "config")
    entry = next((m for m in listed if same_model(str(m.get("id")), model)), listed[0] if len(listed) == 1 else {})
    found = await window_of(endpoint, model, entry)
    if found is None:
        trained = _int((entry.get("meta") or {}).get("n_ctx_train")) if isinstance(entry.get("meta"), dict) else None
        found = (trained, "server: /v1/models meta.n_ctx_train") if trained else (DEFAULT_CONTEXT_WINDOW, "default")
    return EndpointInfo(endpoint.base_url, model, found[0], found[1])


def check_served(names: list[str], listed: list[dict[str, Any]], base_url: str) -> None:
    """ConfigError naming the served models when the server lists models and one of `names` is not among them."""
    served = [str(m.get("id")) for m in listed]
    missing = [n for n in dict.fromkeys(names) if served and not any(same_model(s, n) for s in served)]
    if missing:
        shown = ", ".join(served[:12]) + (f" and {len(served) - 12} more" if len(served) > 12 else "")
        raise ConfigError(f"{base_url} does not serve the model {', '.join(missing)}; it serves {shown}: "
                          "pass one of them with --model")


async def window_of(endpoint: Endpoint, model: str, entry: dict[str, Any]) -> tuple[int, str] | None:
    """(window, where it came from) from what the server reports, or None when it reports nothing usable."""
    for key in ("max_model_len", "context_length", "context_window", "max_context_length"):
        value = _int(entry.get(key))
        if value:
            return value, f"server: /v1/models {key}"
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else None
    if meta is not None or entry.get("owned_by") == "llamacpp":
        props = await _probe(endpoint, "GET", "//props")
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        value = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
        if value:
            return value, "server: /props n_ctx"
        value = _int((meta or {}).get("n_ctx"))
        if value:
            return value, "server: /v1/models meta.n_ctx"
    if entry.get("owned_by") not in ("openai", "system", "openai-internal"):  # Ollama's owners are its users
        found = await native_window(endpoint, model)  # Ollama's /api/ps, LM Studio's loaded context length
        if found is not None:
            return found
    for prefix, value in KNOWN:
        if model.startswith(prefix) or model.split("/")[-1].startswith(prefix):
            return value, "known"
    return None


async def _list_models(endpoint: Endpoint, model: str | None) -> list[dict[str, Any]]:
    """The entries of /v1/models; [] when the server does not list models (then the model must be configured)."""
    try:
        page = await endpoint.get("/models", timeout_s=PROBE_S * 3)
    except ProviderError as exc:
        if exc.proxy:
            host = urllib.parse.urlsplit(endpoint.base_url).hostname
            raise EndpointUnreachable(f"the proxy {exc.proxy} does not answer ({_why(exc)}), so {endpoint.base_url} "
                                      f"cannot be reached through it; fix the proxy setting, or set NO_PROXY={host} "
                                      "to reach the endpoint directly") from exc
        raise EndpointUnreachable(f"no OpenAI-compatible server answers at {endpoint.base_url} ({_why(exc)}); "
                                  "start it or pass the right --base-url") from exc
    except HTTPFailure as failure:
        if failure.status in (401, 403):
            raise ConfigError(f"{endpoint.base_url} refused the API key; set OPENAI_API_KEY "
                              "or pass --api-key") from None
        if failure.status == 404 and await _lacks_v1(endpoint):
            raise ConfigError(f"--base-url {endpoint.base_url} lacks /v1: pass {endpoint.base_url}/v1") from None
        if model is None:
            raise ConfigError(f"{endpoint.base_url}/models answered HTTP {failure.status}, so the model is unknown; "
                              "pass --model (and check that --base-url is an OpenAI-compatible API ending in /v1)"
                              ) from None
        return []  # some providers do not list models; the model is configured
    if not isinstance(page, dict) or not isinstance(page.get("data"), list):
        if await _lacks_v1(endpoint):
            raise ConfigError(f"--base-url {endpoint.base_url} lacks /v1: pass {endpoint.base_url}/v1")
        if model is None:
            raise ConfigError(f"{endpoint.base_url}/models did not answer with a model list, so this is not an "
                              "OpenAI-compatible API; pass the --base-url of one (ending in /v1)")
        return []
    return [m for m in page["data"] if isinstance(m, dict) and m.get("id")]


async def _lacks_v1(endpoint: Endpoint) -> bool:
    """Whether the base URL names the server's root where its OpenAI API is under /v1."""
    return endpoint.root == endpoint.base_url and isinstance(await _probe(endpoint, "GET", "/v1/models"), dict)


async def _probe(endpoint: Endpoint, method: str, path: str, body: Any = None) -> object:
    """A discovery request whose failure only means "not this kind of server": its JSON, or None."""
    try:
        return await endpoint.call(method, path, body=body, timeout_s=PROBE_S)
    except (HTTPFailure, ProviderError):
        return None


def _why(exc: ProviderError) -> str:
    """"connection refused", "timed out", or the error's own words."""
    link: BaseException | None = exc
    while link is not None:
        if isinstance(link, ConnectionRefusedError) or isinstance(getattr(link, "os_error", None),
                                                                  ConnectionRefusedError):
            return "connection refused"
        link = link.__cause__
    if "timed out" in str(exc):
        return "timed out"
    return str(exc).split(": ", 1)[-1][:120]


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
