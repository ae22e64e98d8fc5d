"""Plain, frozen data that crosses the LLM seam: requests, completions, usage."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]


def evolve(value: Any, **changes: Any) -> Any:
    """`value` (a frozen dataclass of this module, none with a `__post_init__`) with `changes`, as
    `dataclasses.replace` makes it, without its per-field work: a request and its reply are copied by several
    layers on every call. A memo of the original (`ChatRequest.fingerprint`'s) is not copied."""
    copy = object.__new__(type(value))
    fields = copy.__dict__
    fields.update(value.__dict__)
    fields.pop("_fingerprint", None)
    fields.update(changes)
    return copy


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for (OpenAI tool calling): its id, the tool's name, the JSON arguments."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """A call as `to_openai` wrote it (or as a cache file before it kept that form: id, name, arguments)."""
        function = data.get("function", data)
        return cls(id=str(data["id"]), name=str(function["name"]), arguments=str(function["arguments"]))


def tool_calls_from(message: Mapping[str, Any]) -> tuple[ToolCall, ...]:
    """The standard `tool_calls` of a reply's message (function calls only; malformed entries skipped)."""
    calls = []
    for i, raw in enumerate(message.get("tool_calls") or []):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        arguments = function.get("arguments")
        if not isinstance(arguments, str):  # some servers send an object instead of a JSON string
            arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
        calls.append(ToolCall(id=str(raw.get("id") or f"call_{i}"), name=function["name"], arguments=arguments))
    return tuple(calls)


@dataclass(frozen=True)
class Message:
    """One chat message. `cache_breakpoint` marks the end of a prefix worth caching (Anthropic-style).

    An assistant message may carry the `tool_calls` it made; a `tool` message answers one of them by
    `tool_call_id`.
    """

    role: Role
    content: str
    cache_breakpoint: bool = False
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    def to_openai(self) -> dict[str, Any]:
        if self.cache_breakpoint:  # Anthropic-style: a text part marked as the end of a cacheable prefix
            part = {"type": "text", "text": self.content, "cache_control": {"type": "ephemeral"}}
            out: dict[str, Any] = {"role": self.role, "content": [part]}
        else:
            out = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


@dataclass(frozen=True)
class ChatRequest:
    """What a stage asks of the model. The client fills in the model for the stage if it is None."""

    messages: tuple[Message, ...]
    stage: str
    doc: int | None = None
    part: int | None = None
    round: int | None = None
    mode: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    response_schema: Mapping[str, Any] | None = None
    schema_name: str = "output"
    prompt_name: str = ""
    prompt_hash: str = ""
    sample: int = 0
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    tools: tuple[Mapping[str, Any], ...] = ()  # OpenAI function tools: {"type": "function", "function": {...}}
    tool_choice: str | Mapping[str, Any] | None = None  # "auto", "none", "required" or a named function

    def with_model(self, model: str) -> ChatRequest:
        return evolve(self, model=model)  # type: ignore[no-any-return]

    def canonical(self) -> dict[str, Any]:
        """The parts of the request that determine the answer (used for cache keys and logs)."""
        return {
            "model": self.model,
            "messages": [m.to_openai() for m in self.messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "response_schema": self.response_schema,
            "schema_name": self.schema_name if self.response_schema is not None else None,
            "extra_body": dict(self.extra_body),
            "sample": self.sample,
            # only when set, so requests without tools keep the keys they had before tool calling
            **({"tools": [dict(t) for t in self.tools]} if self.tools else {}),
            **({"tool_choice": self.tool_choice} if self.tool_choice is not None else {}),
        }

    def fingerprint(self) -> str:
        """SHA-256 of `canonical()`: the settings as sorted JSON, each message as its role, its length
        and its text (length-prefixed, so unambiguous, and without JSON-escaping long prompts again).
        Computed once per request (the call log, the cache and batch mode all ask)."""
        cached = self.__dict__.get("_fingerprint")
        if cached is not None:
            return str(cached)
        canonical = self.canonical()
        messages = canonical.pop("messages")
        digest = hashlib.sha256(json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                                           default=str).encode())
        for message in messages:
            content = message.get("content")
            if isinstance(content, str) and set(message) == {"role", "content"}:
                text = content.encode()
                digest.update(f"\x00{message['role']}\x00{len(text)}\x00".encode())
                digest.update(text)
            else:  # content parts (cache breakpoints) or extra fields: their JSON
                blob = json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
                digest.update(f"\x00json\x00{len(blob)}\x00".encode())
                digest.update(blob)
        value = digest.hexdigest()
        object.__setattr__(self, "_fingerprint", value)  # a memo on a frozen request, not a field
        return value


EVENTS = (
    "retries", "length", "cut_kept", "empty", "reasoning_only", "refusals", "json_repaired", "reasks", "constrained_fallback",
    "failovers", "usage_estimated", "waits", "usage_capped",
)
"""What `Usage.events` counts: transport retries; replies cut at max_tokens (and of those, kept for what
they completed), empty, only in reasoning_content,
refused; structured replies that needed repair, re-asks after a validation error; endpoints without json_schema;
calls a pool sent to another endpoint after theirs was taken out or stopped answering (`pool.Pooled`); replies whose usage was missing or
could not be true, counted from r3con's estimate instead (`client.checked_usage`); waits for a server that was down
or loading (not retries: they spend no retry); replies whose claimed usage would have passed --max-cost, charged at
r3con's estimate instead (`budget.BudgetGuard`)."""


@dataclass(frozen=True)
class Usage:
    """Token counts of one or more calls and their cost in USD; cache hits and events the layers saw.

    `calls` counts requests the endpoint answered (billed); `cache_hits` counts calls served from the
    r3con cache instead, with the tokens and USD they would have cost in `saved_tokens` and `saved_usd`.
    `unpriced` names the models of calls whose price is unknown: then `cost_usd` covers only the others,
    and the total is unknown (`known_cost`: None). `local_calls` counts calls a local server answered
    for free.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    cache_hits: int = 0
    saved_tokens: int = 0
    saved_usd: float = 0.0
    events: Mapping[str, int] = field(default_factory=dict)
    unpriced: tuple[str, ...] = ()
    local_calls: int = 0
    cache_write_tokens: int = 0  # prompt tokens the endpoint wrote to its cache (billed above the input price)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """The usage `to_dict` wrote (keys it does not know are passed over; a null cost is an unknown one)."""
        known = {k: v for k, v in data.items() if k in _USAGE_FIELDS and k not in ("cost_usd", "unpriced")}
        cost = data.get("cost_usd")
        if cost is None:
            cost = data.get("known_cost_usd") or 0.0
        return cls(**known, cost_usd=float(cost), unpriced=tuple(data.get("unpriced") or ()))

    @property
    def known_cost(self) -> float | None:
        """USD of these calls, or None when some call's price is unknown."""
        return None if self.unpriced else self.cost_usd

    def with_cost(self, cost_usd: float, *, unpriced: tuple[str, ...] = (), local: bool = False) -> Usage:
        """This usage priced at `cost_usd` (of its calls with a known price), naming the models without one."""
        names = tuple(sorted(set(self.unpriced) | set(unpriced))) if self.unpriced or unpriced else ()
        return evolve(self, cost_usd=cost_usd, unpriced=names,  # type: ignore[no-any-return]
                      local_calls=self.calls if local else self.local_calls)

    def cost_text(self, digits: int = 4) -> str:
        """"$0.0123", "$0 (local server, free)" or "price unknown (no price for gpt-x: pass --prices FILE)"."""
        if self.unpriced:
            known = f"; ${self.cost_usd:.{digits}f} for the calls priced" if self.cost_usd else ""
            return f"price unknown (no price for {', '.join(self.unpriced)}: pass --prices FILE{known})"
        if self.local_calls and self.local_calls >= self.calls and not self.cost_usd:
            return "$0 (local server, free)"
        return f"${self.cost_usd:.{digits}f}"

    def __add__(self, other: Usage) -> Usage:
        events = dict(self.events)
        for name, n in other.events.items():
            events[name] = events.get(name, 0) + n
        return Usage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            cache_hits=self.cache_hits + other.cache_hits,
            saved_tokens=self.saved_tokens + other.saved_tokens,
            saved_usd=self.saved_usd + other.saved_usd,
            events=events,
            unpriced=tuple(sorted(set(self.unpriced) | set(other.unpriced))),
            local_calls=self.local_calls + other.local_calls,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    def with_event(self, name: str, n: int = 1) -> Usage:
        """This usage with `n` more of event `name`."""
        return self + Usage(events={name: n}) if n else self

    def to_dict(self) -> dict[str, Any]:
        """Its JSON; an unknown price is `cost_usd: null` with `cost_unknown` saying why (`unpriced` the models,
        `known_cost_usd` what the priced calls cost); calls a local server answered free are `local_calls`."""
        out: dict[str, Any] = {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": None if self.unpriced else round(self.cost_usd, 6),
            "cache_hits": self.cache_hits,
            "saved_tokens": self.saved_tokens,
            "saved_usd": round(self.saved_usd, 6),
            "events": {name: n for name, n in sorted(self.events.items()) if n},
        }
        if self.unpriced:
            out.update(unpriced=list(self.unpriced), known_cost_usd=round(self.cost_usd, 6),
                       cost_unknown=f"price unknown: no price for {', '.join(self.unpriced)} in genai-prices or a "
                                    "--prices file")
        if self.local_calls:
            out["local_calls"] = self.local_calls
        if self.cache_write_tokens:
            out["cache_write_tokens"] = self.cache_write_tokens
        return out


_USAGE_FIELDS = frozenset(Usage.__dataclass_fields__)


@dataclass(frozen=True)
class Completion:
    """The model's answer to one request."""

    content: str
    finish_reason: str | None
    usage: Usage
    model: str
    reasoning: str | None = None
    latency_s: float = 0.0
    from_cache: bool = False
    served_from: str | None = None  # with `from_cache`: which earlier answer served it (`answered.SOURCES`)
    refusal: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)
    tool_calls: tuple[ToolCall, ...] = ()

    def to_record(self) -> dict[str, Any]:
        """The reply as stored and logged (the one serialiser of a reply: the LLM cache, the call log and a
        resumed folder's replies all hold these fields): text, reasoning, tool calls, finish reason, model
        and usage (without the events, which belong to the run that saw them)."""
        usage = self.usage.to_dict()
        usage.pop("events", None)
        return {"content": self.content, "reasoning": self.reasoning, "finish_reason": self.finish_reason,
                "model": self.model, "usage": usage, "tool_calls": [c.to_openai() for c in self.tool_calls]}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Completion | None:
        """The reply `to_record` wrote, as served again (`from_cache`); None for a record that holds none."""
        content = record.get("content")
        if not isinstance(content, str):
            return None
        usage = record.get("usage")
        reasoning, finish = record.get("reasoning"), record.get("finish_reason")
        try:
            counted = Usage.from_dict({k: v for k, v in (usage if isinstance(usage, Mapping) else {}).items()
                                       if k != "events"})
            calls = tuple(ToolCall.from_dict(c) for c in record.get("tool_calls") or ())
        except (TypeError, KeyError, AttributeError):
            return None
        return cls(content=content, reasoning=reasoning if isinstance(reasoning, str) else None,
                   finish_reason=finish if isinstance(finish, str) else None, model=str(record.get("model") or ""),
                   usage=counted, from_cache=True, tool_calls=calls)


class LLM(Protocol):
    """The one seam every stage calls. Layers (limits, retries, cache, logging) wrap it."""

    async def complete(self, request: ChatRequest) -> Completion: ...
