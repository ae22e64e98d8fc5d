"""A pool of endpoints (llm/transport/pool.py): configuration, document affinity, failover and per-endpoint accounting."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import r3con
from r3con.config import Settings, endpoint_flags
from r3con.errors import ConfigError, ProviderError
from r3con.llm import build_llm
from r3con.llm.discovery.served import EndpointInfo
from r3con.llm.transport.pool import FIVE_XX_STREAK, Pooled, PoolEntry, _Member, pool_entries, read_pool_file
from r3con.llm.transport.routing import SHARED_KEY, routing_key
from r3con.llm.types import ChatRequest, Completion, Message, Usage
from r3con.pipeline.method import run
from r3con.testing import FakeLLMServer

TASK = "Which people are named in the documents, and how old are they?"
TEXTS = [(f"Letter {i}", f"Person {i} is {20 + i} years old and lives in town {i}.") for i in range(1, 13)]


def test_the_pool_comes_from_repeated_base_urls_the_environment_or_a_pool_file(tmp_path):
    flags = endpoint_flags(["http://a:1/v1", "http://b:2/v1"])
    settings = Settings.resolve(env={}, **flags)
    assert settings.base_url == "http://a:1/v1"
    assert [e.url for e in pool_entries(settings)] == ["http://a:1/v1", "http://b:2/v1"]
    from_env = Settings.resolve(env={"R3CON_BASE_URLS": "http://a:1/v1, http://b:2/v1 http://c:3/v1"})
    assert len(pool_entries(from_env)) == 3 and from_env.base_url == "http://a:1/v1"
    assert pool_entries(Settings.resolve(env={}, **endpoint_flags(["http://a:1/v1"]))) == (), "one URL is no pool"

    path = tmp_path / "pool.toml"
    path.write_text('[[endpoint]]\nurl = "http://gpu1:8000/v1"\nkey_env = "GPU1_KEY"\nmodel = "big"\nweight = 2\n'
                    'concurrency = 16\n\n[[endpoint]]\nurl = "http://gpu2:8000/v1"\n')
    entries = read_pool_file(path, env={"GPU1_KEY": "secret"})
    assert entries == (PoolEntry("http://gpu1:8000/v1", "secret", "big", 2.0, 16), PoolEntry("http://gpu2:8000/v1"))
    json_path = tmp_path / "pool.json"
    json_path.write_text(json.dumps({"endpoint": [{"url": "http://a:1/v1", "key": "k"}]}))
    assert read_pool_file(json_path, env={})[0].api_key == "k"


@pytest.mark.parametrize(("text", "said"), [
    ('[[endpoint]]\nurl = "http://a:1/v1"\nwieght = 2\n', "unknown field(s) wieght"),
    ('[[endpoint]]\nurl = "http://a:1/v1"\nweight = 0\n', "weight = 0 cannot work; give a finite number above 0"),
    ('[[endpoint]]\nurl = "http://a:1/v1"\nweight = nan\n', "weight = nan cannot work; give a finite number above 0"),
    ('[[endpoint]]\nurl = "http://a:1/v1"\nweight = inf\n', "weight = inf cannot work"),
    ('[[endpoint]]\nurl = "http://a:1/v1"\nweight = -2\n', "weight = -2 cannot work"),
    ('[[endpoint]]\nurl = "http://a:1/v1"\nconcurrency = 0\n', "concurrency must be a whole number of at least 1"),
    ('[[endpoint]]\nurl = "http://a:1/v1"\nconcurrency = true\n', "concurrency must be a whole number of at least 1"),
    ('[[endpoint]]\nurl = "http://a:1/v1"\n[[endpoint]]\nurl = "http://a:1/v1"\n', "endpoint 2 (http://a:1/v1) is "
     "endpoint 1 again"),
    ('[[endpoint]]\nurl = "http://HOST:80/v1/"\n[[endpoint]]\nurl = "http://host/v1"\n', "endpoint 2 (http://host/v1) "
     "is endpoint 1 again (the same server however written)"),
    ('[[endpoint]]\nurl = "http://user:hunter2@a:1/v1"\n', "carries a user name and password, which r3con "
     "neither sends nor stores"),
    ('[[endpoint]]\nkey = "k"\n', "has no url"),
    ('[[endpoint]]\nurl = "http://a:1/v1"\nkey_env = "NOPE"\n', "NOPE named by key_env is not set"),
    ("[[endpoint]\n", "is not valid TOML"),
    ("", "lists no endpoint"),
])
def test_a_bad_pool_file_is_one_line_that_says_what_to_fix(tmp_path, text, said):
    path = tmp_path / "pool.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=said.replace("(", r"\(").replace(")", r"\)")) as caught:
        read_pool_file(path, env={})
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("given", [{"base_urls": ["http://user:hunter2@a:1/v1", "http://b:1/v1"]},
                                   {"env": {"OPENAI_BASE_URL": "http://user:hunter2@a:1/v1"}},
                                   {"env": {"R3CON_BASE_URLS": "http://b:1/v1,http://user:hunter2@a:1/v1"}}])
def test_credentials_in_a_url_are_refused_and_never_shown(given):
    env = given.get("env", {})
    flags = endpoint_flags(given.get("base_urls"))
    with pytest.raises(ConfigError, match="carries a user name and password") as caught:
        Settings.resolve(env=env, **flags)
    assert "hunter2" not in str(caught.value) and "***@a:1" in str(caught.value)


@pytest.mark.parametrize("urls", [["http://a:1/v1", "http://a:1/v1/"], ["http://A:1/v1", "http://a:1/v1"],
                                  ["https://a/v1", "https://a:443/v1"]])
def test_the_same_base_url_twice_however_written_is_refused(urls):
    with pytest.raises(ConfigError, match="is given twice") as caught:
        Settings.resolve(env={}, **endpoint_flags(urls))
    assert "list each endpoint of the pool once" in str(caught.value)


@pytest.mark.parametrize(("name", "value"), [("max_cost_usd", "nan"), ("request_timeout_s", "inf"),
                                             ("outage_s", "nan"), ("first_byte_s", "-1")])
def test_numbers_that_cannot_work_are_refused_naming_the_setting(name, value):
    variable = f"R3CON_{name.upper()}"
    with pytest.raises(ConfigError) as caught:
        Settings.resolve(env={variable: value})
    assert variable in str(caught.value) and "\n" not in str(caught.value)


def test_a_bad_routing_header_or_batch_with_a_pool_is_refused():
    with pytest.raises(ConfigError, match="not an HTTP header name"):
        endpoint_flags(None, routing_headers=["X Session"])
    assert endpoint_flags(None, routing_headers=["none"])["routing_headers"] == ()
    with pytest.raises(ConfigError, match="--batch"):
        Settings.resolve(env={}, batch=True, **endpoint_flags(["http://a:1/v1", "http://b:1/v1"]))


async def test_every_call_about_a_document_goes_to_one_endpoint_and_each_endpoint_is_accounted(tmp_path, clean_env):
    servers = [FakeLLMServer(port=0).start() for _ in range(3)]
    try:
        settings = Settings.resolve(env={}, out_dir=tmp_path, **endpoint_flags([s.base_url for s in servers]))
        result = await run(TASK, r3con.documents_from_texts(TEXTS), settings)
    finally:
        for server in servers:
            server.stop()
    docs_of = []
    for server in servers:
        calls = [c for c in server.calls() if c.get("stage") in ("relevance", "populate")]
        docs_of.append({c["doc"] for c in calls})
        for doc in {c["doc"] for c in calls}:  # both rounds and population of each document here
            assert {c["stage"] for c in calls if c["doc"] == doc} == {"relevance", "populate"}
            assert sum(1 for c in calls if c["doc"] == doc and c["stage"] == "relevance") == 2
    assert all(docs_of), "every endpoint served documents"
    assert sum(len(d) for d in docs_of) == len(TEXTS) and set.union(*docs_of) == {str(i) for i in range(1, 13)}
    assert max(len(d) for d in docs_of) <= 6, "the load bound keeps one endpoint from taking most documents"
    usage = json.loads((result.run_dir / "usage.json").read_text())
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    by_endpoint = usage["by_endpoint"]
    assert [e["base_url"] for e in by_endpoint] == [s.base_url for s in servers]
    assert sum(e["calls"] for e in by_endpoint) == usage["calls"]
    assert sum(e["prompt_tokens"] for e in by_endpoint) == usage["prompt_tokens"]
    assert [e["documents"] for e in by_endpoint] == [len(d) for d in docs_of]
    assert manifest["endpoint"]["pool"] == by_endpoint
    page = result.report.read_text()
    assert "Per endpoint of the pool" in page and all(s.base_url in page for s in servers)
    assert manifest["endpoint"]["context_window_source"].startswith("pool: the smallest")


async def test_mixed_windows_plan_for_the_smallest(tmp_path, clean_env):
    with FakeLLMServer(port=0, max_model_len=16384) as small, FakeLLMServer(port=0, max_model_len=65536) as large:
        settings = Settings.resolve(env={}, out_dir=tmp_path, **endpoint_flags([large.base_url, small.base_url]))
        async with build_llm(settings) as stack:
            assert stack.endpoint.context_window == 16384
            assert "16384, 65536" in stack.endpoint.context_window_source


async def test_a_pool_opens_without_an_endpoint_that_does_not_answer_and_says_so(tmp_path, clean_env):
    from ..conftest import free_port

    dead = f"http://127.0.0.1:{free_port()}/v1"
    with FakeLLMServer(port=0) as live:
        settings = Settings.resolve(env={}, out_dir=tmp_path, **endpoint_flags([live.base_url, dead]))
        async with build_llm(settings) as stack:
            assert stack.pool is not None and [s.base_url for s in stack.pool.stats()] == [live.base_url]
            assert len(stack.pool.unreachable) == 1 and dead in stack.pool.unreachable[0]
        settings = Settings.resolve(env={}, out_dir=tmp_path, **endpoint_flags([dead, dead.replace("/v1", "/x/v1")]))
        with pytest.raises(ConfigError, match="no endpoint of the pool answers"):
            async with build_llm(settings):
                pass


class Headers:
    """A chat endpoint that keeps the headers and body of every request."""

    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, str], dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                outer.seen.append((dict(self.headers), body))
                data = json.dumps({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                                   "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


async def test_each_call_carries_its_documents_routing_key_in_the_routers_headers():
    from r3con.llm.transport.client import OpenAIChat

    server = Headers()
    try:
        for flags, expected in ((endpoint_flags([server.url]), ("X-Session-ID", "X-Correlation-ID",
                                                                 "X-SMG-Routing-Key", "X-Dynamo-Session-ID")),
                                (endpoint_flags([server.url], routing_headers=["X-User-ID"]), ("X-User-ID",))):
            chat = OpenAIChat(Settings.resolve(env={}, model="m", **flags))
            await chat.complete(ChatRequest((Message("user", "hi"),), stage="relevance", doc=7, part=2, round=1))
            await chat.complete(ChatRequest((Message("user", "hi"),), stage="schema"))
            await chat.aclose()
            (doc_headers, doc_body), (shared_headers, _) = server.seen[-2:]
            for name in expected:
                assert doc_headers[name] == "r3con-doc-7.2" and shared_headers[name] == SHARED_KEY
            assert "X-Session-ID" in doc_headers or expected == ("X-User-ID",)
            assert "prompt_cache_key" not in doc_body, "only OpenAI's own API gets the body field"
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


class FakeChat:
    """A client that answers, or fails as `script` says per call: None answers, an int is that HTTP status,
    "refused" a failure without a reply."""

    def __init__(self, url: str, script: list[object] | None = None):
        self.url, self.script, self.sent = url, list(script or []), 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.sent += 1
        step = self.script.pop(0) if self.script else None
        if step == "refused":
            raise ProviderError(f"{self.url}: cannot connect", endpoint=self.url)
        if isinstance(step, int):
            raise ProviderError(f"{self.url} answered HTTP {step}", status=step, endpoint=self.url)
        return Completion("ok", "stop", Usage(calls=1, prompt_tokens=10, cached_tokens=4, completion_tokens=1), "m")

    async def aclose(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pool_of(*chats: FakeChat, clock: Clock) -> Pooled:
    return Pooled([_Member(PoolEntry(c.url), c, EndpointInfo(c.url, "m", 8192, "config"), 4)  # type: ignore[arg-type]
                   for c in chats], clock=clock)


def ask(doc: int) -> ChatRequest:
    return ChatRequest((Message("user", "x"),), stage="relevance", doc=doc, model="m")


async def test_an_endpoint_that_stops_answering_is_taken_out_its_documents_move_and_it_is_tried_again_later():
    clock = Clock()
    a, b = FakeChat("http://a/v1"), FakeChat("http://b/v1")
    pool = pool_of(a, b, clock=clock)
    homes = {doc: pool.endpoint_for(routing_key(ask(doc))) for doc in range(1, 21)}
    on_a = [doc for doc, m in homes.items() if m is not None and m.entry.url == a.url]
    assert 5 <= len(on_a) <= 15, "rendezvous hashing bounded by load spreads the documents"
    a.script = ["refused"]
    done = await pool.complete(ask(on_a[0]))
    assert done.usage.events == {"failovers": 1} and a.sent == 1 and b.sent == 1, "sent once more, elsewhere"
    stats = {s.base_url: s for s in pool.stats()}
    assert stats[a.url].out and stats[a.url].errors == 1 and stats[a.url].taken_out == 1
    await pool.complete(ask(on_a[1]))
    assert a.sent == 1 and b.sent == 2, "its other documents moved without trying it"
    clock.now += 6  # past its first time out: new documents may go there again
    for doc in range(21, 41):
        await pool.complete(ask(doc))
    assert a.sent > 1 and not {s.base_url: s for s in pool.stats()}[a.url].out
    assert pool.served()[b.url] >= {routing_key(ask(on_a[0])), routing_key(ask(on_a[1]))}


async def test_a_streak_of_5xx_takes_an_endpoint_out_and_one_5xx_does_not():
    clock = Clock()
    a, b = FakeChat("http://a/v1"), FakeChat("http://b/v1")
    pool = pool_of(a, b, clock=clock)
    doc = next(d for d in range(1, 50) if pool.endpoint_for(routing_key(ask(d))).entry.url == a.url)  # type: ignore[union-attr]
    a.script = [503] * FIVE_XX_STREAK
    for _ in range(FIVE_XX_STREAK - 1):
        with pytest.raises(ProviderError, match="503"):  # the retry layer above retries it
            await pool.complete(ask(doc))
    assert not {s.base_url: s for s in pool.stats()}[a.url].out
    done = await pool.complete(ask(doc))
    assert done.usage.events == {"failovers": 1} and {s.base_url: s for s in pool.stats()}[a.url].out
    a.script, b.script = [429], ["refused"]
    clock.now += 1000
    with pytest.raises(ProviderError, match="429"):
        await pool.complete(ask(doc))  # b is out, a slows us down: a 429 is no reason to leave
    assert {s.base_url: s for s in pool.stats()}[a.url].taken_out == 1


async def test_when_every_endpoint_is_out_the_call_fails_with_when_to_try_again():
    clock = Clock()
    pool = pool_of(FakeChat("http://a/v1", ["refused"]), FakeChat("http://b/v1", ["refused"]), clock=clock)
    with pytest.raises(ProviderError, match="every endpoint of the pool is out") as caught:
        await pool.complete(ask(1))
    assert caught.value.status is None and caught.value.retry_after is not None and 0 < caught.value.retry_after <= 5
    clock.now += 5
    assert (await pool.complete(ask(1))).content == "ok"


async def test_openais_own_api_also_gets_the_key_as_prompt_cache_key():
    from r3con.llm.transport.client import OpenAIChat
    from r3con.llm.transport.endpoint import Endpoint

    server = Headers()

    class OpenAIHere(Endpoint):  # OpenAI's base URL, answered by the local server
        def url(self, path: str) -> str:
            return server.url + path

    try:
        chat = OpenAIChat(Settings.resolve(env={}, model="gpt-4.1-mini"), OpenAIHere("https://api.openai.com/v1"))
        await chat.complete(ChatRequest((Message("user", "hi"),), stage="populate", doc=3))
        await chat.aclose()
        headers, body = server.seen[-1]
        assert body["prompt_cache_key"] == headers["X-Session-ID"] == "r3con-doc-3"
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


async def test_a_pool_of_different_models_names_them_all_in_its_requests_so_changing_one_changes_them(tmp_path, clean_env):
    texts = r3con.documents_from_texts(TEXTS[:4])
    hashes = []
    for second in ("beta", "gamma"):
        with FakeLLMServer(port=0, model="alpha") as a, FakeLLMServer(port=0, model=second) as b:
            settings = Settings.resolve(env={}, out_dir=tmp_path / second, cache=False, log_calls="full",
                                        **endpoint_flags([a.base_url, b.base_url]))
            result = await run(TASK, texts, settings)
            sent = {s: {c.get("model") for c in s.calls() if c.get("stage") == "relevance"} for s in (a, b)}
        assert sent == {a: {"alpha"}, b: {second}}, "each endpoint is asked for its own model"
        logged = [json.loads(line) for line in (result.run_dir / "calls.jsonl").read_text().splitlines()]
        relevance = [c for c in logged if c["stage"] == "relevance"]
        assert {c["request"]["model"] for c in relevance} == {f"pool:alpha,{second}"}
        hashes.append({c["request_hash"] for c in relevance})
    assert not hashes[0] & hashes[1], "another model in the pool: other requests (a resume or reuse pays again)"
    with FakeLLMServer(port=0, model="alpha") as a, FakeLLMServer(port=0, model="alpha") as b:
        settings = Settings.resolve(env={}, out_dir=tmp_path / "same", cache=False,
                                    **endpoint_flags([a.base_url, b.base_url]))
        async with build_llm(settings) as stack:
            completion = await stack.top.complete(ChatRequest((Message("user", "hi"),), stage="relevance"))
    assert completion.model == "alpha" and stack.pool is not None and stack.pool.request_model is None
