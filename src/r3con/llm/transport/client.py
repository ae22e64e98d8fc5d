"""The OpenAI-compatible Chat Completions client: the bottom of the LLM stack.

Chat calls are plain JSON POSTs to `{base_url}/chat/completions` through the one HTTP transport
(`endpoint.Endpoint`). The request body is built and the reply read here only (`chat_body`,
`to_completion`); every HTTP failure becomes one r3con error, mapped in one place (`status_error`).
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...config import Settings
from ...errors import ConfigError, ContextTooLong, ProviderError
from ...tokens import estimate_tokens
from ..discovery.served import EndpointInfo, discover
from ..layers.overflow import is_overflow
from ..types import ChatRequest, Completion, Usage, tool_calls_from
from .endpoint import Account, Endpoint, HTTPFailure
from .routing import is_openai, routing_headers, routing_key


def request_headers(request: ChatRequest) -> dict[str, str]:
    """The X-R3con-* headers that let proxies, logs and test servers tell calls apart."""
    headers = {"X-R3con-Stage": request.stage}
    if request.mode:
        headers["X-R3con-Mode"] = request.mode
    if request.doc is not None:
        headers["X-R3con-Doc"] = str(request.doc)
    if request.part is not None:
        headers["X-R3con-Part"] = str(request.part)
    if request.round is not None:
        headers["X-R3con-Round"] = str(request.round)
    return headers


def chat_body(request: ChatRequest, model: str, *, constrained: bool = True) -> dict[str, Any]:
    """The Chat Completions JSON body of `request` (`constrained`: ask for its schema by `response_format`).

    OpenAI's tool-calling fields: the request's `tools` and `tool_choice`; messages carry their own
    `tool_calls` / `tool_call_id` (`Message.to_openai`).
    """
    body: dict[str, Any] = {"model": model, "messages": [m.to_openai() for m in request.messages]}
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.response_schema is not None and constrained:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": request.schema_name, "schema": dict(request.response_schema), "strict": False},
        }
    if request.tools:
        body["tools"] = [dict(t) for t in request.tools]
    if request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    body.update(request.extra_body)
    return body


def endpoint_for(settings: Settings) -> Endpoint:
    """The transport to the configured endpoint, with its account and the per-request time limit."""
    return Endpoint(settings.require_endpoint(), Account(settings.api_key, settings.organization, settings.project),
                    timeout_s=min(settings.request_timeout_s, settings.max_call_s))


class OpenAIChat:
    """Sends ChatRequests to an OpenAI-compatible endpoint (vLLM, SGLang, Ollama, llama.cpp, OpenRouter, OpenAI).

    Every call carries its document's routing key (`routing`) in `settings.routing_headers`, and in
    `prompt_cache_key` where the endpoint is OpenAI's API.
    """

    def __init__(self, settings: Settings, endpoint: Endpoint | None = None):
        self.endpoint = endpoint or endpoint_for(settings)
        self.base_url = self.endpoint.base_url
        self.default_model = settings.model
        self._routing = tuple(settings.routing_headers)
        self._cache_key = is_openai(self.base_url)
        self._constrained = True  # send response_format json_schema until the endpoint rejects it
        self._max_reply_bytes = settings.max_reply_bytes

    async def aclose(self) -> None:
        await self.endpoint.aclose()

    async def probe(self, timeout_s: float) -> None:
        """Whether the server is alive: GET /models within `timeout_s` (a busy server answers it between
        generations); raises ProviderError or HTTPFailure when it does not answer."""
        await self.endpoint.get("/models", timeout_s=timeout_s)

    async def describe(self, settings: Settings) -> EndpointInfo:
        """Find the model (first served model when none is configured) and the per-request window."""
        return await discover(self.endpoint, settings)

    async def complete(self, request: ChatRequest) -> Completion:
        model = request.model or self.default_model
        if model is None:
            raise ConfigError("no model configured; pass --model or set R3CON_MODEL")
        body = chat_body(request, model, constrained=self._constrained)
        if self._cache_key:
            body.setdefault("prompt_cache_key", routing_key(request))
        started = time.perf_counter()
        try:
            data = await self.endpoint.post("/chat/completions", body,
                                            {**request_headers(request), **routing_headers(request, self._routing)},
                                            max_bytes=reply_limit(request.max_tokens, self._max_reply_bytes))
        except HTTPFailure as failure:
            if failure.status == 400 and "response_format" in body and _NO_SCHEMA.search(failure.message) \
                    and not is_overflow(failure.message + " " + failure.body):
                # the endpoint has no constrained decoding (or not for this schema): ask without it from now on
                self._constrained = False
                completion = await self.complete(request)
                return replace(completion, usage=completion.usage.with_event("constrained_fallback"))
            raise status_error(self.base_url, failure, model, "/chat/completions") from None
        latency = time.perf_counter() - started
        if not isinstance(data, dict):
            raise ConfigError(f"{self.base_url}/chat/completions answered with something that is not a JSON object "
                              f"({str(data)[:80]!r}); pass the --base-url of an OpenAI-compatible API (ending in /v1)")
        return to_completion(data, model, latency, request)


REPLY_BYTES_BASE = 1 << 20  # what a reply may hold besides its tokens (JSON, usage, timings)
REPLY_BYTES_PER_TOKEN = 64  # a token is a few bytes of UTF-8; escaped in JSON (\uXXXX) at most 6 bytes a character
UNASKED_MAX_TOKENS = 32_768  # the reply bound assumed for a request that sets no max_tokens


def reply_limit(max_tokens: int | None, configured: int | None = None) -> int:
    """The most bytes a chat reply is read to: `configured` (R3CON_MAX_REPLY_BYTES), else REPLY_BYTES_BASE plus
    REPLY_BYTES_PER_TOKEN for each token the request lets the model write."""
    if configured:
        return configured
    return REPLY_BYTES_BASE + REPLY_BYTES_PER_TOKEN * (max_tokens or UNASKED_MAX_TOKENS)


def status_error(base_url: str, failure: HTTPFailure, model: str, path: str) -> ProviderError | ConfigError:
    """The r3con error for an error reply to `path`: configuration mistakes as ConfigError (not retried)."""
    if failure.status in (401, 403) and not is_overflow(failure.message):
        return ConfigError(f"{base_url} refused the API key; set OPENAI_API_KEY or pass "
                           "--api-key")
    if is_overflow(failure.message + " " + failure.body) and failure.status in (400, 413, 422, 500):
        return ContextTooLong(
            f"{base_url}: the request is longer than the model's context window ({failure.message})",
            status=failure.status, body=failure.body, endpoint=base_url,
        )
    if failure.status == 404 and re.search(r"\bmodel\b", failure.message, re.IGNORECASE):
        return ConfigError(f"{base_url} has no model {model!r} (HTTP 404: {failure.message[:120]}); "
                           "pass --model with one it serves")
    if failure.status in (404, 405, 501):
        return ConfigError(f"{base_url}{path} answered HTTP {failure.status}: this is not an OpenAI-compatible API; "
                           "pass the --base-url of one (for example http://localhost:8000/v1)")
    return ProviderError(
        f"{base_url} answered HTTP {failure.status}: {failure.message}",
        status=failure.status, body=failure.body, endpoint=base_url,
        retry_after=retry_after_s(failure.headers),
    )


_NO_SCHEMA = re.compile(r"response_format|json_schema|guided|grammar|structured output", re.IGNORECASE)


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date); None if absent."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        if lowered.get("retry-after-ms"):
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        value = lowered.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (ValueError, TypeError, OverflowError):
        return None


def to_completion(data: dict[str, Any], model: str, latency: float, request: ChatRequest | None = None) -> Completion:
    """The Completion of a Chat Completions reply, with its `message.tool_calls`.

    The reply is untrusted: a field of the wrong type reads as absent, and its `usage` is checked
    (`checked_usage`) against `request`, what was sent."""
    choices = data.get("choices")
    choice: dict[str, Any] = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) \
        else {}
    message: dict[str, Any] = choice["message"] if isinstance(choice.get("message"), dict) else {}
    thought = message.get("reasoning_content") or message.get("reasoning")
    content = message["content"] if isinstance(message.get("content"), str) else ""
    reasoning = thought if isinstance(thought, str) else None
    finish = choice.get("finish_reason")
    model_named = data.get("model")
    return Completion(
        content=content,
        finish_reason=finish if isinstance(finish, str) else None,
        usage=checked_usage(data, request, content + (reasoning or "")),
        model=model_named if isinstance(model_named, str) and model_named else model,
        reasoning=reasoning,
        refusal=message.get("refusal") if isinstance(message.get("refusal"), str) else None,
        latency_s=latency,
        raw=data,
        tool_calls=tool_calls_from(message),
    )


def checked_usage(data: dict[str, Any], request: ChatRequest | None, written: str) -> Usage:
    """The reply's token counts if they can be true: whole numbers, 0 or more, a prompt no longer than the
    bytes sent (plus a chat template's share), a reply no longer than `max_tokens` (`usage_bounds`). Otherwise (or
    when the reply has no usage) r3con's own estimate of both, with the event `usage_estimated`: a reply can never
    lower what a run spent, nor claim more than the request could cost."""
    usage: dict[str, Any] = data["usage"] if isinstance(data.get("usage"), dict) else {}
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if request is not None:
        most_prompt, most_reply = usage_bounds(request)
        prompt = None if prompt is not None and prompt > most_prompt else prompt
        completion = None if completion is not None and completion > most_reply else completion
    if prompt is not None and completion is not None:
        cached = min(_cached_tokens(data, usage), prompt)
        writes = min(_written_tokens(usage), prompt - cached)
        return Usage(calls=1, prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached,
                     cache_write_tokens=writes)
    if request is None and not usage:  # a Batch API line without usage: nothing to check it against
        return Usage(calls=1)
    estimated_prompt = sum(estimate_tokens(m.content) + 4 for m in request.messages) if request is not None else 0
    return Usage(calls=1, prompt_tokens=estimated_prompt if prompt is None else prompt,
                 completion_tokens=estimate_tokens(written) if completion is None else completion,
                 events={"usage_estimated": 1})


def usage_bounds(request: ChatRequest) -> tuple[int, int]:
    """The most prompt and reply tokens a reply to `request` may claim: a prompt no longer than the bytes sent
    (`_sent_bytes`), a reply no longer than `max_tokens` (UNASKED_MAX_TOKENS when it sets none) plus
    TEMPLATE_TOKENS. `checked_usage` accepts no more, and `--max-cost` reserves as much before the call is
    sent (`budget.BudgetGuard.worst_case`), so no reply it accepts can lift a run's spend past the cap."""
    reply = UNASKED_MAX_TOKENS if request.max_tokens is None else request.max_tokens
    return _sent_bytes(request), reply + TEMPLATE_TOKENS


def _sent_bytes(request: ChatRequest) -> int:
    """A bound on the prompt tokens of `request`: a token is at least a byte of what was sent (the messages,
    the tools and the response schema a template may write into the prompt), plus the template's own."""
    sent = sum(len(m.content.encode()) for m in request.messages)
    extra = [list(request.tools), request.response_schema] if request.tools or request.response_schema else []
    if extra:
        sent += len(json.dumps(extra, default=str).encode())
    return sent + TEMPLATE_TOKENS * (len(request.messages) + 1)


TEMPLATE_TOKENS = 64  # tokens a chat template may add per message (role markers), or a server past max_tokens


def _count(value: object) -> int | None:
    """A token count as sent, if it is one: a whole number from 0 to 10^12 (not a bool, text or 1e400)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if 0 <= value <= 10**12 else None


def _written_tokens(usage: dict[str, Any]) -> int:
    """Prompt tokens the endpoint wrote to its prompt cache (billed above the input price by Anthropic), wherever
    it reports them."""
    details = usage.get("prompt_tokens_details")
    for value in (
        details.get("cache_write_tokens") if isinstance(details, dict) else None,  # OpenRouter
        usage.get("cache_creation_input_tokens"),  # Anthropic-style usage passed through (LiteLLM and others)
    ):
        count = _count(value)
        if count:
            return count
    return 0


def _cached_tokens(data: dict[str, Any], usage: dict[str, Any]) -> int:
    """Prompt tokens the endpoint served from its prefix cache, wherever it reports them."""
    details = usage.get("prompt_tokens_details")
    timings = data.get("timings") or {}
    for value in (
        details.get("cached_tokens") if isinstance(details, dict) else None,  # OpenAI, vLLM, SGLang, OpenRouter, llama.cpp since 2026-02
        usage.get("cached_tokens"),
        usage.get("cache_read_input_tokens"),  # Anthropic-style usage passed through (LiteLLM and others)
        usage.get("prompt_cache_hit_tokens"),  # DeepSeek
        timings.get("cache_n") if isinstance(timings, dict) else None,  # llama.cpp's llama-server before that
    ):
        count = _count(value)
        if count:
            return count
    return 0
