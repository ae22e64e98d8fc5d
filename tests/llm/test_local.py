"""Local servers found on their ports and told apart; Ollama's and LM Studio's real windows (llm/discovery/local.py),
against stand-ins answering as their documented APIs do. Free ports only: never the usual ones."""

from __future__ import annotations

import time

import pytest

from r3con.config import Settings
from r3con.errors import ConfigError
from r3con.llm.discovery.local import find_servers
from r3con.llm.discovery.served import discover
from r3con.llm.transport.endpoint import Endpoint
from r3con.testing import FakeLLMServer, LMStudioServer, OllamaServer

from ..conftest import free_port


async def test_nothing_listening_costs_well_under_a_second():
    ports = [(free_port(), name) for name in ("Ollama", "llama.cpp", "vLLM", "SGLang", "LM Studio")]
    started = time.perf_counter()
    assert await find_servers(ports) == ()
    assert time.perf_counter() - started < 0.5


async def test_ollama_reports_the_context_a_loaded_model_runs_with_not_the_trained_one():
    with OllamaServer(models=("llama3.2:latest", "qwen3:8b"), running={"llama3.2:latest": 8192}) as server:
        (found,) = await find_servers([(server.port, "Ollama"), (free_port(), "vLLM")])
    assert found.kind == "Ollama" and found.base_url == server.base_url
    llama, qwen = found.models
    assert (llama.id, llama.loaded, llama.window, llama.window_source) == (
        "llama3.2:latest", True, 8192, "Ollama /api/ps context_length")
    assert qwen.loaded is False and qwen.window == 4096 and "not loaded" in qwen.window_source
    assert found.chosen() == llama  # two pulled, one loaded: that one


async def test_ollama_with_several_models_and_none_loaded_chooses_none():
    with OllamaServer(models=("a:latest", "b:latest"), num_ctx=16384) as server:
        (found,) = await find_servers([(server.port, "Ollama")])
    assert found.chosen() is None
    assert {m.window for m in found.models} == {16384}  # the Modelfile's num_ctx (/api/show)


@pytest.mark.parametrize("v1", [True, False])
async def test_lm_studio_reports_the_loaded_context_length(v1):
    with LMStudioServer(models={"qwen2.5-7b-instruct": 32768, "gemma-3-4b": 131072},
                        loaded={"qwen2.5-7b-instruct": 4096}, v1=v1) as server:
        (found,) = await find_servers([(server.port, "LM Studio")])
    assert found.kind == "LM Studio"
    chosen = found.chosen()
    assert chosen is not None and chosen.id == "qwen2.5-7b-instruct" and chosen.loaded
    if v1:  # LM Studio 0.4's API names the loaded context length; v0 lists only the model's maximum
        assert (chosen.window, chosen.window_source) == (4096, "LM Studio /api/v1/models loaded context_length")
    else:
        assert chosen.window == 32768 and "unreported" in chosen.window_source


async def test_an_openai_compatible_server_of_no_known_kind_is_still_found_with_its_window():
    with FakeLLMServer(max_model_len=12000) as server:
        (found,) = await find_servers([(server.port, "vLLM")])
    assert found.kind == "OpenAI-compatible server"
    assert [(m.id, m.window) for m in found.models] == [("r3con-scripted", 12000)]


async def window(server: FakeLLMServer, **settings) -> tuple[str, int, str]:
    endpoint = Endpoint(server.base_url)
    try:
        info = await discover(endpoint, Settings.resolve(env={}, base_url=server.base_url, **settings))
        return info.model, info.context_window, info.context_window_source
    finally:
        await endpoint.aclose()


async def test_a_run_on_ollama_plans_within_the_context_it_runs_with():
    with OllamaServer(models=("llama3.2:latest",), running={"llama3.2:latest": 8192}) as server:
        assert await window(server) == ("llama3.2:latest", 8192, "server: Ollama /api/ps context_length")
        assert (await window(server, model="llama3.2"))[1] == 8192  # Ollama's name without the tag


async def test_lm_studio_window_through_discovery():
    with LMStudioServer(models={"m": 32768}, loaded={"m": 8000}) as server:
        assert await window(server) == ("m", 8000, "server: LM Studio /api/v1/models loaded context_length")


async def test_a_model_the_server_does_not_serve_fails_naming_the_served_ones():
    with OllamaServer(models=("llama3.2:latest", "qwen3:8b")) as server:
        with pytest.raises(ConfigError, match=r"does not serve the model mistral.*llama3.2:latest, qwen3:8b"):
            await window(server, model="mistral")
        with pytest.raises(ConfigError, match="does not serve the model nope"):
            await window(server, model="qwen3:8b", stage_models={"reason": "nope"})
