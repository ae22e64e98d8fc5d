"""The per-document routing key r3con sends with every call, for the routers in front of many replicas.

Every call about one document part (its relevance rounds, its population) carries the same key, so a
router with an affinity policy sends them to the replica whose prefix cache holds that part. Calls
about no document (the schema, the answer) share one key. The key goes in each header of
`config.ROUTING_HEADERS` (or `--routing-header`), and in OpenAI's `prompt_cache_key` body field where the
endpoint is OpenAI's own API. Where each header comes from:

- `X-Session-ID`, `X-Correlation-ID`: the first and fifth headers vLLM router's `consistent_hash`
  policy reads (X-Session-ID, X-User-ID, X-Tenant-ID, X-Request-ID, X-Correlation-ID, X-Trace-ID);
  `X-Session-ID` is also the session header of OpenCode that NVIDIA Dynamo reads.
- `X-SMG-Routing-Key`: the SGLang router's (sgl-model-gateway's) key for its `manual` and
  `consistent_hashing` policies.
- `X-Dynamo-Session-ID`: NVIDIA Dynamo's session, for its session affinity
  (`--router-session-affinity-ttl-secs`).
"""

from __future__ import annotations

import urllib.parse

from ..types import ChatRequest

SHARED_KEY = "r3con-shared"  # calls about no one document (schema, answer): they share the notes' prefix


def routing_key(request: ChatRequest) -> str:
    """The key of the document part `request` is about ("r3con-doc-12", "r3con-doc-12.2"), else SHARED_KEY."""
    if request.doc is None:
        return SHARED_KEY
    return f"r3con-doc-{request.doc}" if request.part is None else f"r3con-doc-{request.doc}.{request.part}"


def routing_headers(request: ChatRequest, names: tuple[str, ...]) -> dict[str, str]:
    """The routing key of `request` under each header name in `names`."""
    key = routing_key(request)
    return {name: key for name in names}


def is_openai(base_url: str) -> bool:
    """Whether `base_url` is OpenAI's own API, which reads `prompt_cache_key` (others may reject unknown fields)."""
    return urllib.parse.urlsplit(base_url).hostname == "api.openai.com"
