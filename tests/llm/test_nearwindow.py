"""Prompts close to a window the server did not report are counted and warned about (llm/layers/nearwindow.py)."""

from __future__ import annotations

import pytest

from r3con.llm import Ledger
from r3con.llm.discovery.served import EndpointInfo
from r3con.llm.layers.nearwindow import NearWindow
from r3con.llm.types import ChatRequest, Message, Usage
from r3con.llm.window import Window, was_asked

from ..fakes import ScriptedLLM


@pytest.mark.parametrize(("source", "asked"), [
    ("config", True), ("server: /props n_ctx", True), ("server: Ollama /api/ps context_length", True),
    ("default", False), ("known", False), ("server: /v1/models meta.n_ctx_train", False),
    ("server: Ollama's default num_ctx (not loaded yet, so not asked)", False),
    ("server: LM Studio max_context_length (not loaded)", False),
])
def test_which_windows_were_asked_of_the_server(source, asked):
    assert was_asked(source) is asked
    assert Window(EndpointInfo("u", "m", 4096, source)).asked is asked


async def test_prompts_near_an_unreported_window_are_counted_and_warned_about():
    ledger = Ledger()
    endpoint = EndpointInfo("http://127.0.0.1:1/v1", "llama3.2", 4096, "server: Ollama's default num_ctx")
    sizes = iter([1000, 3900, 4096])
    scripted = ScriptedLLM(default="ok")
    llm = NearWindow(scripted, ledger, Window(endpoint))
    for _ in range(3):
        scripted.usage = Usage(calls=1, prompt_tokens=next(sizes), completion_tokens=1)
        await llm.complete(ChatRequest(messages=(Message("user", "text"),), stage="relevance"))
    assert ledger.total().events["near_window"] == 2
    warning = llm.warning()
    assert warning is not None and "2 prompt(s)" in warning and "4,096-token window" in warning
    assert "--context-window" in warning


async def test_no_warning_when_prompts_stay_well_within():
    llm = NearWindow(ScriptedLLM(default="ok", usage=Usage(calls=1, prompt_tokens=100)), Ledger(),
                     Window(EndpointInfo("u", "m", 4096, "default")))
    await llm.complete(ChatRequest(messages=(Message("user", "text"),), stage="relevance"))
    assert llm.warning() is None
