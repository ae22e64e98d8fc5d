"""The per-request window is read where each server reports it (llm/discovery/served.py), over real HTTP."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from r3con.config import DEFAULT_CONTEXT_WINDOW, Settings
from r3con.llm.discovery.native import OLLAMA_DEFAULT
from r3con.llm.discovery.served import discover
from r3con.llm.transport.endpoint import Endpoint


class Routes:
    """An HTTP server answering `routes[(method, path)]` as JSON, 404 for anything else; keeps the paths asked."""

    def __init__(self, routes: dict[tuple[str, str], object]):
        self.asked: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str):
                if method == "POST":
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.asked.append(self.path)
                reply = routes.get((method, self.path))
                data = json.dumps(reply if reply is not None else {"error": "not found"}).encode()
                self.send_response(200 if reply is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._answer("GET")

            def do_POST(self):
                self._answer("POST")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


async def window(routes: dict, **settings) -> tuple[tuple[str, int, str], list[str]]:
    server = Routes(routes)
    endpoint = Endpoint(server.url)
    try:
        info = await discover(endpoint, Settings.resolve(env={}, base_url=server.url, **settings))
        return (info.model, info.context_window, info.context_window_source), server.asked
    finally:
        await endpoint.aclose()
        server.close()


def models(*entries: dict) -> dict:
    return {("GET", "/v1/models"): {"object": "list", "data": list(entries)}}


async def test_llama_cpp_one_slot_from_props_not_the_trained_context():
    routes = {**models({"id": "q.gguf", "owned_by": "llamacpp", "meta": {"n_ctx_train": 32768}}),
              ("GET", "/props"): {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 4}}
    assert (await window(routes))[0] == ("q.gguf", 8192, "server: /props n_ctx")


async def test_vllm_max_model_len_without_further_probes():
    found, asked = await window(models({"id": "Qwen/Qwen3-8B", "owned_by": "vllm", "max_model_len": 40960}))
    assert found == ("Qwen/Qwen3-8B", 40960, "server: /v1/models max_model_len") and asked == ["/v1/models"]


@pytest.mark.parametrize(("parameters", "expected"), [
    ("num_ctx                        16384\nstop \"<|im_end|>\"", (16384, "server: Ollama /api/show num_ctx")),
    ("stop \"<|im_end|>\"", (OLLAMA_DEFAULT, "server: Ollama's default num_ctx (not loaded yet, so not asked)")),
])
async def test_an_ollama_without_api_ps_serves_its_num_ctx_not_the_trained_context(parameters, expected):
    routes = {**models({"id": "qwen3:8b", "owned_by": "library"}),
              ("POST", "/api/show"): {"modelfile": "FROM qwen3", "parameters": parameters,
                                      "model_info": {"qwen3.context_length": 40960}}}
    assert (await window(routes))[0] == ("qwen3:8b", *expected)


async def test_openai_models_by_name_and_an_unknown_model_gets_the_default():
    routes = models({"id": "gpt-4o-mini", "owned_by": "system"}, {"id": "mystery", "owned_by": "someone"})
    assert (await window(routes, model="gpt-4o-mini"))[0] == ("gpt-4o-mini", 128_000, "known")
    assert (await window(routes, model="mystery"))[0] == ("mystery", DEFAULT_CONTEXT_WINDOW, "default")


async def test_configuration_wins_and_asks_nothing():
    found, asked = await window({}, model="m", context_window=4096)
    assert found == ("m", 4096, "config") and asked == []
