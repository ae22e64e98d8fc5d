"""The window behind a router: asked of the workers the router lists, since what it passes through may not say.

The SGLang router (sgl-model-gateway) answers `/v1/models` itself (model "unknown", no window) and
does not pass `/props` through; vLLM router passes `/v1/models` and `/props` to one worker, which
says nothing of the others. Both list their workers: `GET /workers` ({"workers": [{"url"}]}), and
vLLM router also `GET /list_workers` ({"urls": [...]}). Where the base URL lists workers, each is
asked as one endpoint would be (`window.discover`) and the smallest window wins, so every call fits
whichever worker the router picks.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from ...config import Settings
from ...errors import ConfigError, ProviderError
from ..transport.endpoint import Endpoint, HTTPFailure
from .served import PROBE_S, EndpointInfo, discover

MAX_WORKERS = 16  # workers asked; a larger fleet is asked of its first 16 (they serve one model)


async def workers_of(endpoint: Endpoint) -> list[str]:
    """The base URLs (…/v1) of the workers a router at `endpoint` lists; [] when it is not a router."""
    for path in ("//workers", "//list_workers"):
        try:
            listed = await endpoint.call("GET", path, timeout_s=PROBE_S)
        except (HTTPFailure, ProviderError):
            continue
        urls: list[object] = []
        if isinstance(listed, dict) and isinstance(listed.get("workers"), list):
            urls = [w.get("url") for w in listed["workers"] if isinstance(w, dict)]
        elif isinstance(listed, dict) and isinstance(listed.get("urls"), list):
            urls = list(listed["urls"])
        found = [u.rstrip("/") for u in urls if isinstance(u, str) and u.startswith(("http://", "https://"))]
        if found:
            return [u if u.endswith("/v1") else u + "/v1" for u in found]
    return []


async def through_router(endpoint: Endpoint, settings: Settings, info: EndpointInfo) -> EndpointInfo:
    """`info` with the smallest window of the router's workers, when `endpoint` is a router that lists them."""
    if info.context_window_source in ("config", "known"):  # configured, or OpenAI's own models: no router
        return info
    workers = (await workers_of(endpoint))[:MAX_WORKERS]
    if not workers:
        return info
    asked = [Endpoint(url, endpoint.account, timeout_s=PROBE_S * 3) for url in workers]
    try:
        found = await asyncio.gather(*(discover(w, settings) for w in asked), return_exceptions=True)
    finally:
        for w in asked:
            await w.aclose()
    windows = [f for f in found if isinstance(f, EndpointInfo)]
    if not windows:
        reasons = "; ".join(str(f) for f in found if isinstance(f, ConfigError | ProviderError))[:300]
        return replace(info, context_window_source=f"{info.context_window_source} (the router's workers did not "
                                                   f"answer: {reasons})")
    smallest = min(windows, key=lambda w: w.context_window)
    model = info.model if info.model != "unknown" or settings.model else smallest.model
    return EndpointInfo(info.base_url, model, smallest.context_window,
                        f"router: the smallest of {len(windows)} workers' windows ({smallest.context_window_source})")
