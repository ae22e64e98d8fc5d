"""A tool-calling agent loop over the standard OpenAI `tools` / `tool_calls` fields, for a-rag and fileagent.

Each turn sends the conversation with the tool definitions; the model either calls tools (each call is
validated against the tool's JSON schema and dispatched by name, and its result, or the mistake, goes
back as a `tool` message) or answers in plain text, which ends the run. After `max_turns` turns one
last call, with `tool_choice: "none"`, asks for the answer from what was found (the run is then capped).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from ..llm import LLM
from ..llm.json_reply import NoJSON, loads
from ..llm.replies import final_answer_line, reply_text
from ..llm.types import ChatRequest, Message, ToolCall, Usage
from ..prompts.render import Rendered, render


class ToolError(Exception):
    """The model used a tool wrongly (a bad path, a missing chunk): the message goes back to the model."""


@dataclass(frozen=True)
class Tool:
    """One function the model may call: its name, what it does, its JSON-schema parameters, and the code."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    run: Callable[..., Awaitable[str]]

    def spec(self) -> dict[str, Any]:
        """The OpenAI `tools` entry."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}}


@dataclass(frozen=True)
class ToolStep:
    """One tool call in the transcript: which tool, with what arguments, whether it worked, how much came back."""

    turn: int
    tool: str
    arguments: str
    ok: bool
    observation: str

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "tool": self.tool, "arguments": self.arguments, "ok": self.ok,
                "observation": self.observation[:500]}


@dataclass(frozen=True)
class AgentResult:
    """What the loop produced: the answer, the turns it took, whether the turn bound hit, its tool calls."""

    answer: str
    turns: int
    capped: bool
    steps: tuple[ToolStep, ...]
    usage: Usage


async def dispatch(tools: Mapping[str, Tool], call: ToolCall, observation_chars: int) -> tuple[str, bool]:
    """Run one tool call; its observation and whether it worked. The model's mistakes (an unknown tool,
    arguments that are not a JSON object or break the schema, a ToolError) become the observation."""
    tool = tools.get(call.name)
    if tool is None:
        return f"error: there is no tool {call.name!r}; the tools are {', '.join(sorted(tools))}", False
    try:
        arguments = loads(call.arguments or "{}")
    except NoJSON as exc:
        return f"error: the arguments of {call.name} are not valid JSON ({exc}); send a JSON object", False
    if not isinstance(arguments, dict):
        return f"error: the arguments of {call.name} must be a JSON object, not {type(arguments).__name__}", False
    problem = next(iter(jsonschema.Draft202012Validator(dict(tool.parameters)).iter_errors(arguments)), None)
    if problem is not None:
        where = ".".join(str(p) for p in problem.absolute_path) or "arguments"
        return f"error: {call.name} {where}: {problem.message}", False
    try:
        text = await tool.run(**arguments)
    except ToolError as exc:
        return f"error: {exc}", False
    if len(text) > observation_chars:
        text = text[:observation_chars] + f"\n[... cut at {observation_chars} characters; ask for less]"
    return text, True


@dataclass(frozen=True)
class AgentLimits:
    """How far the loop goes: its model turns, each reply's tokens and temperature, each observation's characters."""

    max_turns: int
    max_tokens: int
    temperature: float | None = None
    observation_chars: int = 12_000


async def run_tool_agent(llm: LLM, *, stage: str, system: Rendered, task: str, tools: Sequence[Tool],
                         limits: AgentLimits) -> AgentResult:
    """Run the loop for at most `limits.max_turns` model turns; see the module docstring. The system prompt's
    name and hash go with every call."""
    max_turns = limits.max_turns
    by_name = {t.name: t for t in tools}
    specs = tuple(t.spec() for t in tools)
    messages: list[Message] = [Message("system", system.text), Message("user", task)]
    steps: list[ToolStep] = []
    usage = Usage()

    async def ask(turn: int, choice: str, mode: str) -> Any:
        nonlocal usage
        completion = await llm.complete(ChatRequest(
            messages=tuple(messages), stage=stage, round=turn, mode=mode, max_tokens=limits.max_tokens,
            temperature=limits.temperature, tools=specs, tool_choice=choice, prompt_name=system.name,
            prompt_hash=system.hash))
        usage = usage + completion.usage
        return completion

    for turn in range(1, max_turns + 1):
        completion = await ask(turn, "auto", "tools")
        if not completion.tool_calls:
            return AgentResult(final_answer_line(reply_text(completion)), turn, False, tuple(steps), usage)
        messages.append(Message("assistant", completion.content or "", tool_calls=completion.tool_calls))
        for call in completion.tool_calls:
            observation, ok = await dispatch(by_name, call, limits.observation_chars)
            steps.append(ToolStep(turn, call.name, call.arguments, ok, observation))
            messages.append(Message("tool", observation, tool_call_id=call.id))
    messages.append(Message("user", render("tool_final").text))
    completion = await ask(max_turns + 1, "none", "final")
    return AgentResult(final_answer_line(reply_text(completion)), max_turns, True, tuple(steps), usage)
