"""The tool-agent loop: dispatch by name, arguments checked against the schema, mistakes back to the model, the turn bound."""

import json

import pytest

from r3con.baselines._toolagent import AgentLimits, Tool, ToolError, dispatch, run_tool_agent
from r3con.llm.types import ChatRequest, Completion, ToolCall, Usage
from r3con.prompts.render import Rendered

SYSTEM = Rendered(text="sys", name="test_system", hash="h0")


async def _echo(text: str, times: int = 1) -> str:
    if text == "boom":
        raise ToolError("no such thing")
    return text * times


ECHO = Tool("echo", "repeat text", {"type": "object", "properties": {"text": {"type": "string"},
                                                                   "times": {"type": "integer", "minimum": 1}},
                                    "required": ["text"], "additionalProperties": False}, _echo)


class ToolModel:
    """Calls `echo` with each of `arguments` in turn (one call a turn), then answers; records the requests."""

    def __init__(self, arguments: list[str], name: str = "echo"):
        self.arguments, self.name, self.requests = arguments, name, []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        turn = len(self.requests) - 1
        if request.tool_choice != "none" and turn < len(self.arguments):
            call = ToolCall(f"c{turn}", self.name, self.arguments[turn])
            return Completion("", "tool_calls", Usage(calls=1, prompt_tokens=5, completion_tokens=2), "m", tool_calls=(call,))
        return Completion("thinking\nAnswer: done", "stop", Usage(calls=1, prompt_tokens=5, completion_tokens=2), "m")


@pytest.mark.parametrize(("arguments", "expected"), [
    ('{"text": "ab", "times": 2}', "abab"),
    ('{"text": 3}', "error: echo text: 3 is not of type 'string'"),
    ('{"times": 2}', "error: echo arguments: 'text' is a required property"),
    ('{"text": "a", "extra": 1}', "error: echo arguments: Additional properties are not allowed ('extra' was unexpected)"),
    ('[1, 2]', "error: the arguments of echo must be a JSON object, not list"),
    ('{"text": ', "error: the arguments of echo are not valid JSON"),
    ('{"text": ' + "[" * 10_000 + "]" * 10_000 + "}", "error: the arguments of echo are not valid JSON (the JSON nests "
     "deeper than 64 levels)"),
    ('{"text": "boom"}', "error: no such thing"),
])
async def test_dispatch_validates_arguments_and_returns_mistakes(arguments, expected):
    observation, ok = await dispatch({"echo": ECHO}, ToolCall("c", "echo", arguments), 1000)
    assert observation.startswith(expected) and ok == (not expected.startswith("error"))


async def test_unknown_tool_and_long_results_are_observations():
    observation, ok = await dispatch({"echo": ECHO}, ToolCall("c", "rm", "{}"), 1000)
    assert not ok and "there is no tool 'rm'; the tools are echo" in observation
    observation, ok = await dispatch({"echo": ECHO}, ToolCall("c", "echo", '{"text": "x", "times": 50}'), 10)
    assert ok and observation.startswith("x" * 10) and "cut at 10 characters" in observation


async def test_tool_results_go_back_as_tool_messages_and_a_plain_reply_ends_the_run():
    model = ToolModel(['{"text": "hi"}', '{"text": 1}'])
    result = await run_tool_agent(model, stage="s", system=SYSTEM, task="q", tools=[ECHO],
                                  limits=AgentLimits(max_turns=5, max_tokens=10))
    assert (result.answer, result.turns, result.capped) == ("done", 3, False)
    assert [s.ok for s in result.steps] == [True, False] and result.usage.calls == 3
    last = model.requests[-1].messages
    assert [m.role for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert last[2].tool_calls[0].id == "c0" and last[3].tool_call_id == "c0" and last[3].content == "hi"
    assert last[5].content.startswith("error: echo text")
    body = model.requests[0]
    assert body.tools == (ECHO.spec(),) and body.tool_choice == "auto" and body.round == 1
    assert all((r.prompt_name, r.prompt_hash) == ("test_system", "h0") for r in model.requests)


async def test_the_turn_bound_forces_a_final_answer_without_tools():
    model = ToolModel([json.dumps({"text": str(i)}) for i in range(10)])
    result = await run_tool_agent(model, stage="s", system=SYSTEM, task="q", tools=[ECHO],
                                  limits=AgentLimits(max_turns=3, max_tokens=10))
    assert result.capped and result.turns == 3 and len(result.steps) == 3 and result.answer == "done"
    assert [r.tool_choice for r in model.requests] == ["auto", "auto", "auto", "none"]
    assert model.requests[-1].messages[-1].role == "user"
