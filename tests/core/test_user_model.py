"""A user's model plugs in: `r3con.run` takes any object with `complete(request) -> completion` and wraps it
in r3con's own layers (the cache, retries, the call log), as it does the HTTP endpoint."""

import json

import r3con
from r3con.testing import FakeLLMServer, ScriptedModel

from .test_identity import LETTERS, WHITBY, outputs


def settings(tmp_path, **extra) -> r3con.Settings:
    return r3con.Settings.resolve(env={}, out_dir=tmp_path / "runs", cache_path=tmp_path / "llm.sqlite", **extra)


async def test_an_in_process_model_gives_what_the_same_model_over_http_gives(tmp_path):
    docs = r3con.documents_from_texts(LETTERS[:6])
    model = ScriptedModel()
    local = await r3con.run(WHITBY, docs, settings(tmp_path / "local"), llm=model)
    with FakeLLMServer() as server:
        remote = await r3con.run(WHITBY, docs, settings(tmp_path / "http", base_url=server.base_url))
    assert outputs(local) == outputs(remote)
    assert len(model.requests) == local.usage.calls == remote.usage.calls
    assert {r.stage for r in model.requests} == {"relevance", "schema", "populate", "reason"}
    logged = [json.loads(line) for line in (local.run_dir / "calls.jsonl").read_text().splitlines()]
    assert len(logged) == len(model.requests), "every call of the user's model is in the run's call log"


async def test_a_function_model_is_retried_cached_and_capped_by_r3cons_layers(tmp_path):
    scripted = ScriptedModel()
    failures: list[str] = []

    class Flaky:  # a model written as a Python function: the first call of each document fails once
        async def complete(self, request: r3con.ChatRequest) -> r3con.Completion:
            key = f"{request.stage}:{request.doc}:{request.round}"
            if request.doc is not None and key not in failures:
                failures.append(key)
                raise r3con.ProviderError("internal error", status=500)
            return await scripted.complete(request)

    docs = r3con.documents_from_texts(LETTERS[:4])
    config = settings(tmp_path, retry_base_s=0.01, max_tokens_cap=200)
    first = await r3con.run(WHITBY, docs, config, llm=Flaky())
    assert first.degraded == () and first.usage.events.get("retries", 0) == len(failures) > 0
    assert all(r.max_tokens is not None and r.max_tokens <= 200 for r in scripted.requests)
    asked = len(scripted.requests)
    again = await r3con.run(WHITBY, docs, config, llm=Flaky())
    assert len(scripted.requests) == asked and again.usage.calls == 0, "the second run is answered by the cache"
    assert outputs(again) == outputs(first)
