"""A user's model plugs in: `r3con.run` takes any object with `complete(request) -> completion` and wraps it
in r3con's own layers (the cache, retries, the call log), as it does the HTTP endpoint."""

import json
import subprocess
import sys

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


USER_MODEL = '''
from dataclasses import replace

from r3con.testing import ScriptedModel


class Model:  # a user's model: the scripted replies, its notes marked
    def __init__(self):
        self.inner = ScriptedModel()

    async def complete(self, request):
        reply = await self.inner.complete(request)
        if request.stage == "relevance":
            reply = replace(reply, content=reply.content + " {mark}")
        return reply
'''

RUN_IT = '''
import asyncio, json, sys
import r3con
sys.path.insert(0, sys.argv[1])
import usermodel
letters = json.loads(open(sys.argv[2]).read())
settings = r3con.Settings.resolve(env={}, out_dir=sys.argv[1] + "/runs", cache_path=sys.argv[1] + "/llm.sqlite")
result = asyncio.run(r3con.run(sys.argv[3], r3con.documents_from_texts([tuple(x) for x in letters]), settings,
                               llm=usermodel.Model()))
print(json.dumps({"calls": result.usage.calls, "hits": result.usage.cache_hits,
                  "notes": " ".join(" ".join(n.values()) for n in result.notes)}))
'''


def test_an_edited_model_run_again_in_a_new_process_is_not_served_its_predecessors_replies(tmp_path):
    letters = tmp_path / "letters.json"
    letters.write_text(json.dumps(LETTERS[:4]))

    def run_with(mark: str) -> dict:
        (tmp_path / "usermodel.py").write_text(USER_MODEL.replace("{mark}", mark))
        done = subprocess.run([sys.executable, "-c", RUN_IT, str(tmp_path), str(letters), WHITBY],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    first = run_with("first-mark")
    edited = run_with("second-mark")
    assert edited["calls"] == first["calls"] > 0 and edited["hits"] == 0, "the edited model is asked again"
    assert "second-mark" in edited["notes"] and "first-mark" not in edited["notes"]
    again = run_with("second-mark")
    assert again["calls"] == 0 and again["hits"] == first["calls"], "the same model is answered by the cache"
    assert "second-mark" in again["notes"]


async def test_a_model_with_no_source_to_read_is_asked_again_rather_than_served_from_the_cache(tmp_path):
    scope: dict = {"ScriptedModel": ScriptedModel}
    exec("class Typed:\n    def __init__(self):\n        self.inner = ScriptedModel()\n"
         "    async def complete(self, request):\n        return await self.inner.complete(request)\n", scope)
    docs = r3con.documents_from_texts(LETTERS[:3])
    first = await r3con.run(WHITBY, docs, settings(tmp_path), llm=scope["Typed"]())
    again = await r3con.run(WHITBY, docs, settings(tmp_path), llm=scope["Typed"]())
    assert again.usage.calls == first.usage.calls > 0 and again.usage.cache_hits == 0
