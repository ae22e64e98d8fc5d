"""The OpenAI-compatible Chat Completions client: the bottom of the LLM stack.

Chat calls are plain JSON POSTs to `{base_url}/chat/completions`, sent by aiohttp when it is
installed (`pip install r3con[fast]`; `R3CON_HTTP_CLIENT=sdk|aiohttp` chooses) or else through the
openai SDK's low-level `post`; listing models goes through the SDK. Either way every HTTP failure
becomes an `_HTTPFailure` first and then one r3con error, mapped in one place (`_status_error`).
"""

from __future__ import annotations

import email.utils
import importlib.util
import json
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import openai

from ..config import DEFAULT_CONTEXT_WINDOW, Settings
from ..errors import ConfigError, ContextTooLong, EndpointUnreachable, ProviderError
from .types import ChatRequest, Completion, Usage, tool_calls_from


@dataclass(frozen=True)
class EndpointInfo:
    """What the endpoint told us about itself (or what configuration says)."""

    base_url: str
    model: str
    context_window: int
    context_window_source: str  # "config", "server", or "default"


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
    """The Chat Completions JSON body of `request` (`constrained`: ask for its schema by `response_format`)."""
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


class _HTTPFailure(Exception):
    """An HTTP error reply, from either transport: status, the error's message, the body, the headers."""

    def __init__(self, status: int, message: str, body: str, headers: Mapping[str, str]):
        super().__init__(message)
        self.status, self.message, self.body, self.headers = status, message, body, headers


def use_aiohttp(choice: str) -> bool:
    """Whether chat calls go through aiohttp: `aiohttp`, or `auto` with aiohttp installed."""
    if choice == "aiohttp" and importlib.util.find_spec("aiohttp") is None:
        raise ConfigError("R3CON_HTTP_CLIENT=aiohttp needs aiohttp: pip install 'r3con[fast]', or set it to sdk")
    return choice == "aiohttp" or (choice == "auto" and importlib.util.find_spec("aiohttp") is not None)


def env_proxy(base_url: str) -> str | None:
    """The proxy for `base_url` from HTTP(S)_PROXY and NO_PROXY, as the openai SDK's httpx reads them.

    Looked up once per client: aiohttp's `trust_env` looks it up for every request, which cost
    about 0.8 ms of CPU a call (bench/bench_scale.py).
    """
    parts = urllib.parse.urlsplit(base_url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme) or None


class OpenAIChat:
    """Sends ChatRequests to an OpenAI-compatible endpoint (vLLM, SGLang, Ollama, llama.cpp, OpenRouter, OpenAI)."""

    def __init__(self, settings: Settings):
        self.base_url = settings.require_endpoint().rstrip("/")
        self.default_model = settings.model
        self._api_key = settings.api_key or "EMPTY"
        self._timeout_s = settings.request_timeout_s
        self._client = openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self._api_key,
            max_retries=0,
            timeout=settings.request_timeout_s,
        )
        self.transport = "aiohttp" if use_aiohttp(settings.http_client) else "sdk"
        self._session: Any = None  # the aiohttp session, opened on the first call (it needs the running loop)
        self._proxy: str | None = None
        self._constrained = True  # send response_format json_schema until the endpoint rejects it

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        await self._client.close()

    async def _post_chat(self, body: dict[str, Any], headers: dict[str, str]) -> object:
        """POST the body; the reply's JSON. Raises _HTTPFailure for an error status, ProviderError without reply."""
        if self.transport == "aiohttp":
            return await self._post_aiohttp(body, headers)
        try:
            # The SDK's low-level post: its auth, base URL, timeouts and typed errors, without validating the
            # request against its typed parameters and the reply into pydantic models, which cost about
            # 1.5 ms of CPU a call (bench/bench_scale.py); the body is plain JSON built here, the reply a dict.
            return await self._client.post("/chat/completions", body=body, cast_to=object, options={"headers": headers})
        except openai.APIConnectionError as exc:
            kind = "timed out" if isinstance(exc, openai.APITimeoutError) else "connection failed"
            raise ProviderError(f"{self.base_url}: request {kind} ({exc})", endpoint=self.base_url) from exc
        except openai.APIStatusError as exc:
            text = exc.response.text[:2000] if exc.response is not None else ""
            raise _HTTPFailure(exc.status_code, _error_message(exc.body, str(exc.message)), text,
                               exc.response.headers if exc.response is not None else {}) from exc

    async def _post_aiohttp(self, body: dict[str, Any], headers: dict[str, str]) -> object:
        import aiohttp

        if self._session is None:
            self._proxy = env_proxy(self.base_url)
            session_headers = {"Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json",
                               "Accept": "application/json", "User-Agent": "r3con"}
            # The account headers the SDK takes from OPENAI_ORG_ID / OPENAI_PROJECT_ID, so both paths send them.
            for name, value in (("OpenAI-Organization", self._client.organization),
                                ("OpenAI-Project", self._client.project)):
                if value:
                    session_headers[name] = value
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout_s),
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                headers=session_headers,
            )
        try:
            async with self._session.post(f"{self.base_url}/chat/completions", data=json.dumps(body).encode(),
                                          headers=headers, proxy=self._proxy) as response:
                raw = await response.read()
                status, reply_headers = response.status, dict(response.headers)
        except TimeoutError as exc:
            raise ProviderError(f"{self.base_url}: request timed out (after {self._timeout_s:g} s)",
                                endpoint=self.base_url) from exc
        except aiohttp.ClientError as exc:
            raise ProviderError(f"{self.base_url}: request connection failed ({exc})", endpoint=self.base_url) from exc
        text = raw.decode("utf-8", errors="replace")
        try:
            data = json.loads(text)
        except ValueError:
            data = text
        if status >= 400:
            raise _HTTPFailure(status, _error_message(data, text or f"HTTP {status}"), text[:2000], reply_headers)
        return data

    async def describe(self, settings: Settings) -> EndpointInfo:
        """Find the model (first served model when none is configured) and the context window."""
        model = settings.model
        window = settings.context_window
        source = "config" if window else "default"
        needs_listing = model is None or window is None
        if needs_listing:
            try:
                page = await self._client.models.list()
                listed = list(page.data)
            except openai.APIConnectionError as exc:
                raise EndpointUnreachable(
                    f"no OpenAI-compatible server answers at {self.base_url}; start it or pass the right --base-url"
                ) from exc
            except openai.AuthenticationError as exc:
                raise ConfigError(f"{self.base_url} refused the API key; set OPENAI_API_KEY or pass --api-key") from exc
            except openai.APIStatusError:
                listed = []  # some providers do not list models; configuration must then name one
            if model is None:
                if not listed:
                    raise ConfigError(f"{self.base_url} lists no model; pass --model or set R3CON_MODEL")
                model = listed[0].id
            if window is None:
                entry = next((m for m in listed if m.id == model), None)
                found = _context_window_of(entry.model_dump() if entry is not None else {})
                window, source = (found, "server") if found else (DEFAULT_CONTEXT_WINDOW, "default")
        if model is None or window is None:
            raise ConfigError("pass --model and --context-window; the endpoint could not tell them")
        return EndpointInfo(self.base_url, model, window, source)

    async def complete(self, request: ChatRequest) -> Completion:
        model = request.model or self.default_model
        if model is None:
            raise ConfigError("no model configured; pass --model or set R3CON_MODEL")
        body = chat_body(request, model, constrained=self._constrained)
        started = time.perf_counter()
        try:
            data = await self._post_chat(body, request_headers(request))
        except _HTTPFailure as failure:
            if failure.status == 400 and "response_format" in body and _NO_SCHEMA.search(failure.message) \
                    and not _TOO_LONG.search(failure.message):
                # the endpoint has no constrained decoding (or not for this schema): ask without it from now on
                self._constrained = False
                completion = await self.complete(request)
                return replace(completion, usage=completion.usage.with_event("constrained_fallback"))
            raise self._status_error(failure) from None
        latency = time.perf_counter() - started
        if not isinstance(data, dict):
            raise ProviderError(f"{self.base_url}/chat/completions answered with something that is not a JSON object "
                                f"({str(data)[:120]!r}); check --base-url points at an OpenAI-compatible /v1",
                                endpoint=self.base_url)
        return _to_completion(data, model, latency)

    def _status_error(self, failure: _HTTPFailure) -> ProviderError | ConfigError:
        if failure.status == 401:
            return ConfigError(f"{self.base_url} refused the API key; set OPENAI_API_KEY or pass --api-key")
        if failure.status == 400 and _TOO_LONG.search(failure.message + " " + failure.body):
            return ContextTooLong(
                f"{self.base_url}: the request is longer than the model's context window ({failure.message})",
                status=400, body=failure.body, endpoint=self.base_url,
            )
        return ProviderError(
            f"{self.base_url} answered HTTP {failure.status}: {failure.message}",
            status=failure.status, body=failure.body, endpoint=self.base_url,
            retry_after=retry_after_s(failure.headers),
        )


_NO_SCHEMA = re.compile(r"response_format|json_schema|guided|grammar|structured output", re.IGNORECASE)
_TOO_LONG = re.compile(r"context length|context window|context_length_exceeded|maximum context|prompt is too long|too many tokens",
                       re.IGNORECASE)


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


def _error_message(body: object, fallback: str) -> str:
    """The message of an error reply: OpenAI's {"error": {"message"}}, or {"message"}, else `fallback`."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
        if isinstance(inner, str) and inner:
            return inner[:300]
        if body.get("message"):
            return str(body["message"])[:300]
    return fallback[:300]


def _context_window_of(entry: dict[str, Any]) -> int | None:
    """vLLM: max_model_len; OpenRouter: context_length; llama.cpp: meta.n_ctx_train."""
    for key in ("max_model_len", "context_length", "context_window", "max_context_length"):
        value = entry.get(key)
        if isinstance(value, int) and value > 0:
            return value
    meta = entry.get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("n_ctx_train"), int):
        return int(meta["n_ctx_train"])
    return None


def _to_completion(data: dict[str, Any], model: str, latency: float) -> Completion:
    choices = data.get("choices") or [{}]
    choice = choices[0] or {}
    message = choice.get("message") or {}
    usage = data.get("usage") or {}
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return Completion(
        content=message.get("content") or "",
        finish_reason=choice.get("finish_reason"),
        usage=Usage(
            calls=1,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=_cached_tokens(data, usage),
        ),
        model=data.get("model") or model,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        refusal=message.get("refusal") if isinstance(message.get("refusal"), str) else None,
        latency_s=latency,
        raw=data,
        tool_calls=tool_calls_from(message),
    )


def _cached_tokens(data: dict[str, Any], usage: dict[str, Any]) -> int:
    """Prompt tokens the endpoint served from its prefix cache, wherever it reports them."""
    details = usage.get("prompt_tokens_details") or {}
    timings = data.get("timings") or {}
    for value in (
        details.get("cached_tokens"),  # OpenAI, vLLM, SGLang, OpenRouter, llama.cpp since 2026-02
        usage.get("cached_tokens"),
        usage.get("cache_read_input_tokens"),  # Anthropic-style usage passed through (LiteLLM and others)
        usage.get("prompt_cache_hit_tokens"),  # DeepSeek
        timings.get("cache_n") if isinstance(timings, dict) else None,  # llama.cpp's llama-server before that
    ):
        if isinstance(value, int | float) and value > 0:
            return int(value)
    return 0
