"""Tool calling through the seam: the standard fields out, `tool_calls` back, in the cache key and the cache."""

import sqlite3

from r3con.config import Settings
from r3con.llm import build_llm
from r3con.llm.cache import CallCache, cache_key
from r3con.llm.transport.client import chat_body
from r3con.llm.types import ChatRequest, Completion, Message, ToolCall, Usage, tool_calls_from
from r3con.testing import FakeLLMServer

TOOL = {"type": "function", "function": {"name": "find", "description": "search",
                                         "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                        "required": ["query"]}}}


def _request(**changes):
    messages = (Message("user", "<task>\nWho is Count Dracula?\n</task>"),)
    return ChatRequest(messages=messages, stage="s", **changes)


def test_the_body_carries_tools_and_the_conversation_in_standard_fields_only():
    call = ToolCall("c1", "find", '{"query": "x"}')
    request = _request(tools=(TOOL,), tool_choice="auto")
    request = ChatRequest(messages=(*request.messages, Message("assistant", "", tool_calls=(call,)),
                                    Message("tool", "found", tool_call_id="c1")), stage="s", tools=(TOOL,),
                          tool_choice="auto")
    body = chat_body(request, "m")
    assert body["tools"] == [TOOL] and body["tool_choice"] == "auto"
    assert body["messages"][1] == {"role": "assistant", "content": "",
                                   "tool_calls": [{"id": "c1", "type": "function",
                                                   "function": {"name": "find", "arguments": '{"query": "x"}'}}]}
    assert body["messages"][2] == {"role": "tool", "content": "found", "tool_call_id": "c1"}
    assert set(chat_body(_request(), "m")) == {"model", "messages"}  # nothing added without tools


def test_tool_calls_are_read_from_a_reply_and_change_the_cache_key():
    message = {"tool_calls": [{"id": "a", "type": "function", "function": {"name": "find", "arguments": {"query": 1}}},
                              {"type": "function", "function": {"arguments": "{}"}}]}  # the second has no name
    assert tool_calls_from(message) == (ToolCall("a", "find", '{"query": 1}'),)
    plain, with_tools = _request(), _request(tools=(TOOL,))
    assert plain.canonical().keys() == {"model", "messages", "max_tokens", "temperature", "response_schema",
                                        "schema_name", "extra_body", "sample"}  # keys of requests without tools unchanged
    assert len({cache_key("e", plain), cache_key("e", with_tools), cache_key("e", _request(tools=(TOOL,), tool_choice="none"))}) == 3


def test_the_cache_keeps_tool_calls_and_opens_files_written_before_them(tmp_path):
    path = tmp_path / "c.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, model TEXT NOT NULL, stage TEXT NOT NULL,"
                " content TEXT NOT NULL, reasoning TEXT, finish_reason TEXT, usage TEXT NOT NULL, created REAL NOT NULL)")
    old.execute("INSERT INTO calls VALUES ('old', 'e', 'm', 's', 'hello', NULL, 'stop', '{\"calls\": 1}', 0)")
    old.commit()
    old.close()
    cache = CallCache(path)
    assert cache.get("old").content == "hello" and cache.get("old").tool_calls == ()
    completion = Completion("", "tool_calls", Usage(calls=1), "m", tool_calls=(ToolCall("c", "find", "{}"),))
    cache.put("new", "e", "s", completion)
    assert cache.get("new").tool_calls == completion.tool_calls


async def test_the_scripted_server_answers_tool_calls_over_http(clean_env):
    with FakeLLMServer() as server:
        settings = Settings.resolve(env={}, base_url=server.base_url, cache=False)
        async with build_llm(settings) as llm:
            first = await llm.complete(_request(tools=(TOOL,), tool_choice="auto"))
            assert first.tool_calls and first.tool_calls[0].name == "find" and "Dracula" in first.tool_calls[0].arguments
            follow = _request(tools=(TOOL,), tool_choice="auto")
            follow = ChatRequest(messages=(*follow.messages, Message("assistant", "", tool_calls=first.tool_calls),
                                           Message("tool", "Count Dracula lives in a castle in Transylvania.",
                                                   tool_call_id=first.tool_calls[0].id)),
                                 stage="s", tools=(TOOL,), tool_choice="auto")
            answer = await llm.complete(follow)
            assert not answer.tool_calls and "Answer:" in answer.content and "Transylvania" in answer.content
        assert server.calls()[0]["status"] == 200
