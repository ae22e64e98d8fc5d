"""r3con through the real routers: each document's calls reach one worker by r3con's routing key, the window is
the workers', and the engines' prefix caches pay on the second round."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

import r3con
from r3con.config import Settings
from r3con.llm import build_llm
from r3con.llm.transport.client import OpenAIChat
from r3con.llm.types import ChatRequest, Message
from r3con.pipeline.method import run

from ..real_server.servers import Process

pytestmark = pytest.mark.usefixtures("clean_env")

ROUTERS = [("vllm-router", "consistent_hash"), ("sglang-router", "manual")]
TASK = "Which people are named in the documents, and how old are they?"
FILLER = " ".join(f"The harbour ledger for week {w} lists cargo, weather and the names of the crew." for w in range(40))
TEXTS = [(f"Letter {i}", f"Person {i} is {20 + i} years old and lives in town {i}. {FILLER}") for i in range(1, 7)]


def prompt_tokens(server: Process) -> float:
    """The prompt tokens a llama-server has taken in (its /metrics), cached or not."""
    with urllib.request.urlopen(f"{server.root}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return sum(float(m) for m in re.findall(r"^llamacpp:prompt_tokens(?:_cached)?_total (\S+)$", text, re.MULTILINE))


@pytest.mark.parametrize(("name", "policy"), ROUTERS)
async def test_every_call_with_one_documents_key_reaches_one_worker(routed, name, policy):
    with routed(name, policy) as (router, servers):
        chat = OpenAIChat(Settings.resolve(env={}, base_url=f"{router.root}/v1", model="m"))
        used = set()
        try:
            for doc in range(1, 13):
                before = [prompt_tokens(s) for s in servers]
                for round_no in (1, 2, 3):  # different text each time: only the key ties them together
                    await chat.complete(ChatRequest((Message("user", f"Round {round_no}: about document {doc}."),),
                                                    stage="relevance", doc=doc, round=round_no, max_tokens=1))
                grew = [i for i, s in enumerate(servers) if prompt_tokens(s) > before[i]]
                assert len(grew) == 1, f"document {doc}'s calls went to workers {grew}"
                used.add(grew[0])
        finally:
            await chat.aclose()
        assert used == {0, 1}, "the router spread the documents over its workers"


@pytest.mark.parametrize(("name", "policy"), ROUTERS)
async def test_a_run_through_the_router_plans_for_the_workers_window_and_reuses_their_caches(
        routed, name, policy, tmp_path):
    with routed(name, policy) as (router, _):
        settings = Settings.resolve(env={}, base_url=f"{router.root}/v1", out_dir=tmp_path / "runs", cache=False,
                                    note_max_tokens=48, populate_max_tokens=48, reason_max_tokens=512,
                                    reasoning="direct", max_failed_share=1.0)
        async with build_llm(settings) as stack:
            assert stack.endpoint.context_window == 8192, "one slot of the workers, not the model's 32,768"
            assert stack.endpoint.context_window_source.startswith("router: the smallest of 2 workers' windows")
        result = await run(TASK, r3con.documents_from_texts(TEXTS), settings)
    calls = [json.loads(line) for line in (result.run_dir / "calls.jsonl").read_text().splitlines()]
    second = [c for c in calls if c["stage"] == "relevance" and c["round"] == 2 and "error" not in c]
    assert len({c["doc"] for c in second}) >= len(TEXTS) - 2, "most documents' second round was answered"
    for call in second:  # the document, at the prompt's head, came from the cache of the worker that read it
        assert call["usage"]["cached_tokens"] >= 0.5 * call["usage"]["prompt_tokens"], call["usage"]
