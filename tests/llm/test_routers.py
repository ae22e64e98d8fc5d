"""The window behind a router is asked of the workers it lists (llm/discovery/routers.py), over real HTTP."""

from __future__ import annotations

from r3con.config import Settings
from r3con.llm import build_llm
from r3con.testing import FakeLLMServer

from .test_window import Routes


def _router(workers: list[FakeLLMServer], shape: str) -> Routes:
    """A router that lists `workers` the SGLang router's way (`/workers`) or vLLM router's (`/list_workers`),
    and answers /v1/models itself, knowing no window."""
    roots = [w.base_url.removesuffix("/v1") for w in workers]
    listing = {("GET", "/workers"): {"workers": [{"url": r, "model_id": "unknown"} for r in roots]}} \
        if shape == "workers" else {("GET", "/list_workers"): {"urls": roots}}
    return Routes({("GET", "/v1/models"): {"object": "list", "data": [{"id": "unknown", "owned_by": "local"}]},
                   **listing})


async def test_the_window_behind_a_router_is_the_smallest_of_its_workers(clean_env):
    with FakeLLMServer(port=0, max_model_len=8192) as small, FakeLLMServer(port=0, max_model_len=16384) as large:
        for shape in ("workers", "list_workers"):
            router = _router([large, small], shape)
            try:
                async with build_llm(Settings.resolve(env={}, base_url=router.url, cache=False)) as stack:
                    info = stack.endpoint
            finally:
                router.close()
            assert info.context_window == 8192, "a call must fit whichever worker the router picks"
            assert info.context_window_source == "router: the smallest of 2 workers' windows (server: /v1/models max_model_len)"
            assert info.model == "r3con-scripted", "the workers' model, not the router's 'unknown'"
            assert info.base_url == router.url, "calls still go through the router"


async def test_a_configured_window_or_a_plain_server_asks_no_workers(clean_env):
    with FakeLLMServer(port=0, max_model_len=8192) as worker:
        router = _router([worker], "workers")
        try:
            settings = Settings.resolve(env={}, base_url=router.url, context_window=4096, model="m", cache=False)
            async with build_llm(settings) as stack:
                assert (stack.endpoint.context_window, stack.endpoint.context_window_source) == (4096, "config")
            assert "/workers" not in router.asked
        finally:
            router.close()
        async with build_llm(Settings.resolve(env={}, base_url=worker.base_url, cache=False)) as stack:
            assert stack.endpoint.context_window_source == "server: /v1/models max_model_len"
