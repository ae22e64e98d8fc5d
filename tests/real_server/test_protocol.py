"""The LLM client against a real llama.cpp server: window, chat, json_schema through its grammar engine,
tokenize, cached prompt tokens, context overflow, cut replies."""

from __future__ import annotations

import re

import pytest

from r3con.config import Settings
from r3con.errors import ContextTooLong, OutputError
from r3con.eval.judges import _SCHEMAS as JUDGE_SCHEMAS
from r3con.llm import ChatRequest, Message, build_llm
from r3con.llm.transport.client import OpenAIChat
from r3con.llm.transport.tokenize import EndpointCounter
from r3con.stages._evidence import with_passage
from r3con.stages.schema import validate_schema

from .conftest import SLOT_TOKENS

pytestmark = pytest.mark.usefixtures("clean_env")


def settings(base_url: str, tmp_path, **kw) -> Settings:
    return Settings.resolve(env={}, base_url=base_url, cache=False, out_dir=tmp_path, retries=2, **kw)


def ask(text: str, **kw) -> ChatRequest:
    return ChatRequest(messages=(Message("user", text),), stage=kw.pop("stage", "relevance"), **kw)


async def test_the_window_is_one_slots_context_from_props_not_the_trained_context(llama_server, tmp_path):
    client = OpenAIChat(settings(llama_server, tmp_path))
    try:
        info = await client.describe(settings(llama_server, tmp_path))
    finally:
        await client.aclose()
    assert info.context_window == SLOT_TOKENS and info.context_window_source == "server: /props n_ctx"
    assert info.model.endswith(".gguf")


async def test_a_chat_call_comes_back_with_usage(llama_server, tmp_path):
    client = OpenAIChat(settings(llama_server, tmp_path, model="tiny"))
    try:
        completion = await client.complete(ask("Say hello.", max_tokens=24, temperature=1.0, extra_body={"seed": 7}))
    finally:
        await client.aclose()
    assert completion.usage.calls == 1 and completion.usage.prompt_tokens > 3
    assert 0 < completion.usage.completion_tokens <= 24
    assert completion.finish_reason in ("stop", "length")


SCHEMAS = {  # shapes a model proposes (validate_schema's subset) with r3con's _passage added, as populate sends
    "people": {"type": "object", "properties": {"people": {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": ["integer", "null"]}, "city": {"type": "string"}},
        "required": ["name"]}}}},
    "typed": {"type": "object", "properties": {
        "events": {"type": "array", "items": {"type": "object", "properties": {
            "date": {"type": "string", "description": "ISO date"}, "deaths": {"type": "number", "minimum": 0},
            "confirmed": {"type": "boolean"}, "kind": {"type": "string", "enum": ["attack", "illness", "other"]},
            "victims": {"type": "array", "items": {"type": "string"}}}, "required": ["date", "kind"]}},
        "places": {"type": "array", "items": {"type": "object", "properties": {
            "place": {"type": "string"}, "where": {"type": "object", "properties": {"country": {"type": "string"}}}},
            "additionalProperties": False}}}},
}


async def constrained(base_url: str, tmp_path, schema: dict, name: str):
    """One request with `schema` as its response_format; the reply, and whether the client still constrains."""
    client = OpenAIChat(settings(base_url, tmp_path, model="tiny"))
    try:
        completion = await client.complete(ask("Answer in JSON.", stage="populate", max_tokens=8, temperature=1.0,
                                               response_schema=schema, schema_name=name, extra_body={"seed": 7}))
        return completion, client._constrained
    finally:
        await client.aclose()


@pytest.mark.parametrize("name", sorted(SCHEMAS))
async def test_every_records_schema_goes_through_the_grammar_engine(llama_server, tmp_path, name):
    completion, still_constrained = await constrained(llama_server, tmp_path,
                                                      with_passage(validate_schema(SCHEMAS[name])), "records")
    assert still_constrained and "constrained_fallback" not in completion.usage.events, "llama.cpp refused it"
    assert completion.content.lstrip().startswith("{"), "the grammar makes the reply a JSON object"


@pytest.mark.parametrize("benchmark", sorted(JUDGE_SCHEMAS))
async def test_every_judge_schema_goes_through_the_grammar_engine(llama_server, tmp_path, benchmark):
    name, schema = JUDGE_SCHEMAS[benchmark]
    completion, still_constrained = await constrained(llama_server, tmp_path, schema, name)
    assert still_constrained and "constrained_fallback" not in completion.usage.events, "llama.cpp refused it"
    text = completion.content  # noise, but in the grammar's shape: "{", whitespace, then the first key
    assert text.lstrip().startswith("{") and ('"' not in text or re.match(r'\s*\{\s*"rationale"', text)), text


async def test_tokenize_counts_with_the_servers_tokenizer(llama_server):
    counter = EndpointCounter(llama_server, "any")
    try:
        counts = await counter.count(["hello world", "Mina wrote to Lucy about the storm."])
    finally:
        await counter.aclose()
    assert counts[0] == 2 and counts[1] > 5  # the Qwen2 tokenizer: "hello", " world"
    assert counter.source.endswith("/tokenize")


async def test_a_repeated_prompt_is_served_from_the_prefix_cache_and_read(llama_server, tmp_path):
    prompt = "Jonathan Harker kept a diary of his journey to the castle. " * 60
    request = ask(prompt, max_tokens=4, temperature=0.0)
    client = OpenAIChat(settings(llama_server, tmp_path, model="tiny"))
    try:
        await client.complete(request)
        again = await client.complete(request)
    finally:
        await client.aclose()
    assert again.usage.cached_tokens > 500


async def test_a_request_longer_than_a_slot_is_context_too_long_not_a_failure(llama_server, tmp_path):
    words = "storm " * (SLOT_TOKENS + 500)
    async with build_llm(settings(llama_server, tmp_path)) as llm:
        with pytest.raises(ContextTooLong, match="longer than the model's context window"):
            await llm.complete(ask(words, max_tokens=8))
        assert llm.ledger.total().events.get("retries", 0) == 0, "an overflow is not retried"


async def test_a_reply_cut_at_max_tokens_is_never_asked_with_a_bigger_budget(llama_server, tmp_path):
    async with build_llm(settings(llama_server, tmp_path)) as llm:
        try:
            completion = await llm.complete(ask("Write a long story.", max_tokens=12, temperature=1.0))
            usage = completion.usage
        except OutputError as exc:  # noise with no complete sentence, twice: an OutputError that keeps its usage
            usage = exc.usage
    assert usage.calls <= 2 and usage.completion_tokens <= 12 * usage.calls, "asked once more at most, same budget"
