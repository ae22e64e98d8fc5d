"""The Chat Completions client over real HTTP: what it sends, how it reads replies, how it maps failures."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from r3con.config import Settings
from r3con.errors import ConfigError, ContextTooLong, ProviderError
from r3con.llm.transport.client import OpenAIChat
from r3con.llm.transport.client import to_completion as _to_completion
from r3con.llm.transport.endpoint import env_proxy
from r3con.llm.types import ChatRequest, Message

REQUEST = ChatRequest(messages=(Message("system", "Read."), Message("user", "<task>q</task> hello")),
                      stage="populate", doc=4, round=None, max_tokens=77, temperature=0.0, model="m",
                      response_schema={"type": "object"}, schema_name="records", extra_body={"top_k": 5})


def reply(content: str = "ok", **usage: object) -> dict:
    return {"id": "x", "object": "chat.completion", "model": "served-model",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, **usage}}


class Scripted:
    """A one-off HTTP server answering each POST with the next (status, body, content type) of `replies`."""

    def __init__(self, *replies: tuple[int, object, str]):
        self.replies = list(replies)
        self.seen: list[tuple[dict, dict]] = []
        self.extra_headers: dict[str, str] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status, payload, ctype = outer.replies.pop(0)
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                for name, value in outer.extra_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def client(self, env: dict[str, str] | None = None) -> OpenAIChat:
        port = self.httpd.server_address[1]
        return OpenAIChat(Settings.resolve(env=env or {}, base_url=f"http://127.0.0.1:{port}/v1", api_key="k"))

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


async def complete_once(server: Scripted, request: ChatRequest = REQUEST, env: dict[str, str] | None = None):
    """One call through a fresh client of `server`, closed afterwards."""
    client = server.client(env)
    try:
        return await client.complete(request)
    finally:
        await client.aclose()


@pytest.fixture
def scripted():
    """Make a scripted server."""
    servers = []

    def make(*replies):
        servers.append(Scripted(*replies))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


async def test_sends_a_plain_chat_completions_body_with_stage_headers(scripted):
    server = scripted((200, reply("hi", prompt_tokens_details={"cached_tokens": 6}), "application/json"))
    client = server.client()
    try:
        completion = await client.complete(REQUEST)
    finally:
        await client.aclose()
    headers, body = server.seen[0]
    assert headers["x-r3con-stage"] == "populate" and headers["x-r3con-doc"] == "4" and "x-r3con-round" not in headers
    assert headers["authorization"] == "Bearer k"
    assert body == {"model": "m", "messages": [{"role": "system", "content": "Read."},
                                               {"role": "user", "content": "<task>q</task> hello"}],
                    "max_tokens": 77, "temperature": 0.0, "top_k": 5,
                    "response_format": {"type": "json_schema", "json_schema": {
                        "name": "records", "schema": {"type": "object"}, "strict": False}}}
    assert completion.content == "hi" and completion.model == "served-model" and completion.finish_reason == "stop"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens, completion.usage.cached_tokens) == (10, 2, 6)


async def test_the_account_headers_come_from_the_environment(scripted):
    server = scripted((200, reply(), "application/json"))
    await complete_once(server, env={"OPENAI_ORG_ID": "org-7", "OPENAI_PROJECT_ID": "proj-9"})
    headers, _ = server.seen[0]
    assert (headers["openai-organization"], headers["openai-project"]) == ("org-7", "proj-9")


async def test_no_account_headers_without_them_in_the_environment(scripted):
    server = scripted((200, reply(), "application/json"))
    await complete_once(server)
    headers, _ = server.seen[0]
    assert "openai-organization" not in headers and "openai-project" not in headers


async def test_an_endpoint_without_constrained_decoding_is_asked_again_without_response_format(scripted):
    error = {"error": {"message": "response_format json_schema is not supported", "type": "invalid_request_error"}}
    server = scripted((400, error, "application/json"), (200, reply("{}"), "application/json"),
                      (200, reply("{}"), "application/json"))
    client = server.client()
    try:
        first = await client.complete(REQUEST)
        await client.complete(REQUEST)
    finally:
        await client.aclose()
    assert ["response_format" in body for _, body in server.seen] == [True, False, False], "remembered"
    assert first.usage.events == {"constrained_fallback": 1}


async def test_context_overflow_is_its_own_error(scripted):
    error = {"error": {"message": "This model's maximum context length is 8192 tokens. However, you requested 9000"}}
    server = scripted((400, error, "application/json"))
    with pytest.raises(ContextTooLong, match="longer than the model's context window"):
        await complete_once(server)


async def test_a_reply_that_is_not_a_json_object_names_the_base_url(scripted):
    server = scripted((200, "<html>login page</html>", "text/html"))
    with pytest.raises(ConfigError, match="not a JSON object.*--base-url"):
        await complete_once(server)


async def test_server_errors_keep_status_and_retry_after(scripted):
    server = scripted((503, {"error": {"message": "overloaded"}}, "application/json"))
    with pytest.raises(ProviderError, match="HTTP 503: overloaded") as caught:
        await complete_once(server)
    assert caught.value.status == 503


@pytest.mark.parametrize(("usage", "cached"), [
    ({"prompt_tokens_details": {"cached_tokens": 7}}, 7),  # OpenAI, vLLM, SGLang, OpenRouter
    ({"cached_tokens": 5}, 5),
    ({"cache_read_input_tokens": 4, "cache_creation_input_tokens": 100}, 4),  # Anthropic-style usage
    ({"prompt_cache_hit_tokens": 3, "prompt_cache_miss_tokens": 7}, 3),  # DeepSeek
    ({"prompt_tokens_details": None}, 0),
    ({"prompt_tokens_details": {"cached_tokens": None}}, 0),
])
def test_cached_tokens_are_read_from_each_providers_usage(usage, cached):
    assert _to_completion(reply(**usage), "m", 0.0).usage.cached_tokens == cached


def test_cached_tokens_of_an_older_llama_server_come_from_its_timings():
    data = {**reply(), "timings": {"cache_n": 8, "prompt_n": 2, "predicted_n": 2}}
    assert _to_completion(data, "m", 0.0).usage.cached_tokens == 8
    assert _to_completion({**reply(), "timings": None}, "m", 0.0).usage.cached_tokens == 0


def test_reasoning_fields_of_vllm_and_openrouter_are_kept():
    data = reply("")
    data["choices"][0]["message"]["reasoning_content"] = "thinking"
    assert _to_completion(data, "m", 0.0).reasoning == "thinking"
    data["choices"][0]["message"] = {"role": "assistant", "content": "x", "reasoning": "other"}
    assert _to_completion(data, "m", 0.0).reasoning == "other"


async def test_a_refused_key_says_which_variable_to_set(scripted):
    server = scripted((401, {"error": {"message": "Incorrect API key provided"}}, "application/json"))
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        await complete_once(server)


async def test_rate_limits_carry_retry_after(scripted):
    server = scripted((429, {"error": {"message": "slow down"}}, "application/json"))
    server.extra_headers = {"Retry-After": "7"}
    with pytest.raises(ProviderError) as caught:
        await complete_once(server)
    assert caught.value.status == 429 and caught.value.retry_after == 7.0


async def test_no_server_is_a_provider_error_naming_the_endpoint():
    client = OpenAIChat(Settings.resolve(env={}, base_url="http://127.0.0.1:9/v1", api_key="k"))
    try:
        with pytest.raises(ProviderError, match="127.0.0.1:9/v1: cannot connect to http://127.0.0.1:9/v1/chat"):
            await client.complete(REQUEST)
    finally:
        await client.aclose()


@pytest.mark.parametrize(("status", "message"), [(501, "Unsupported method ('POST')"), (404, "File not found"),
                                                 (405, "Method Not Allowed")])
async def test_a_plain_http_server_is_a_config_error_at_once_with_its_status(scripted, status, message):
    server = scripted((status, f"<html><title>Error response</title><p>{message}</p></html>", "text/html"))
    with pytest.raises(ConfigError, match=f"answered HTTP {status}: this is not an OpenAI-compatible API"):
        await complete_once(server)


async def test_an_unknown_model_says_pass_a_served_one(scripted):
    error = {"error": {"message": "The model `gpt-9` does not exist", "code": "model_not_found"}}
    server = scripted((404, error, "application/json"))
    with pytest.raises(ConfigError, match="has no model 'm'.*pass --model"):
        await complete_once(server)


async def test_a_gateway_error_page_is_a_provider_error_with_its_status(scripted):
    server = scripted((502, "<html><body>Bad Gateway</body></html>", "text/html"))
    with pytest.raises(ProviderError, match="HTTP 502") as caught:
        await complete_once(server)
    assert caught.value.status == 502 and "Bad Gateway" in caught.value.body


def test_the_proxy_comes_from_the_environment_once_per_client(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https://api.openai.com/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert env_proxy("https://api.openai.com/v1") == "http://proxy.internal:3128"
    assert env_proxy("http://127.0.0.1:8000/v1") is None, "NO_PROXY hosts go direct"
    assert env_proxy("http://gpu-box:8000/v1") is None, "no HTTP_PROXY for http URLs"
