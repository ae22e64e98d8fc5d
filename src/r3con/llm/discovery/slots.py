"""How many requests the server works on at once: llama.cpp's slots.

`llama-server -np 4` serves four requests at a time and queues the rest; a queued request's time
counts against r3con's per-call limit, so sending more than the slots only turns waiting into
timeouts. llama.cpp says its slots in `/props` (`total_slots`); vLLM and SGLang batch as many
requests as fit and say no such number, so the configured concurrency (or `DEFAULT_CONCURRENCY`) holds.
"""

from __future__ import annotations

from ...config import DEFAULT_CONCURRENCY, Settings
from ...errors import ProviderError
from ..transport.endpoint import Endpoint, HTTPFailure

PROBE_S = 10.0


async def server_slots(endpoint: Endpoint) -> int | None:
    """llama.cpp's `total_slots` from `/props`; None from a server that does not say."""
    try:
        props = await endpoint.call("GET", "//props", timeout_s=PROBE_S)
    except (HTTPFailure, ProviderError):
        return None
    value = props.get("total_slots") if isinstance(props, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


async def concurrency_for(endpoint: Endpoint, settings: Settings) -> tuple[int, str]:
    """(requests in flight, where the number came from): --concurrency, else the server's slots, else the default."""
    if settings.concurrency is not None:
        return settings.concurrency, "config"
    slots = await server_slots(endpoint)
    if slots is not None:
        return slots, "server: /props total_slots"
    return DEFAULT_CONCURRENCY, "default"
