"""The one HTTP transport under the LLM seam: every request r3con sends to the endpoint goes through here.

One aiohttp session per client, opened on the first request (it needs the running loop): chat
completions, model listing and window discovery, embeddings, the Batch API's files and batches, and
`/tokenize`. It adds the API key, the OpenAI-Organization / OpenAI-Project headers and the proxy of
the environment (read once per client rather than on every request, as aiohttp's `trust_env` does).
A reply with an error status becomes an `HTTPFailure`; no reply at all
(refused, dropped, timed out) a `ProviderError` without a status, which the retry layer retries.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from ...config import check_base_url
from ...errors import ConfigError, OutputError, ProviderError
from ..json_reply import MAX_DEPTH, NoJSON, loads


@dataclass(frozen=True)
class Account:
    """Who the endpoint bills: the API key, and OpenAI's optional organisation and project."""

    api_key: str | None = None
    organization: str | None = None
    project: str | None = None


OTHER_REPLY_BYTES = 256 << 20  # what any other reply (models, props, embeddings, tokenize) is read to


class HTTPFailure(Exception):
    """An HTTP error reply: the status, the error's message, the body (2,000 characters at most), the headers."""

    def __init__(self, status: int, message: str, body: str, headers: Mapping[str, str]):
        super().__init__(message)
        self.status, self.message, self.body, self.headers = status, message, body, headers


def env_proxy(base_url: str) -> str | None:
    """The proxy for `base_url` from HTTP(S)_PROXY and NO_PROXY (read once per client)."""
    parts = urllib.parse.urlsplit(base_url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme) or None


def proxy_shown(proxy: str | None) -> str:
    """The proxy URL without its password, and the variable that set it (for messages)."""
    parts = urllib.parse.urlsplit(proxy or "")
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    variable = next((v for v in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
                     if os.environ.get(v) and os.environ[v].rstrip("/") == (proxy or "").rstrip("/")), "the environment")
    return f"{parts.scheme}://{netloc} (from {variable})" if parts.scheme else f"{proxy} (from {variable})"


def error_message(body: object, fallback: str) -> str:
    """The message of an error reply: OpenAI's {"error": {"message"}}, or {"message"}/{"detail"}, else `fallback`."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
        if isinstance(inner, str) and inner:
            return inner[:300]
        for key in ("message", "detail"):
            if isinstance(body.get(key), str) and body[key]:
                return str(body[key])[:300]
    return " ".join(fallback.split())[:300]


class Endpoint:
    """An OpenAI-compatible server at `base_url` (ending in /v1, usually); `root` is the server without it."""

    def __init__(self, base_url: str, account: Account = Account(), *, timeout_s: float = 600.0):
        self.base_url = check_base_url(base_url)
        self.root = re.sub(r"/v\d+$", "", self.base_url)
        self.account = account
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._proxy: str | None = None
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._proxy = env_proxy(self.base_url)
            headers = {"Authorization": f"Bearer {self.account.api_key or 'EMPTY'}", "Accept": "application/json",
                       "User-Agent": "r3con"}
            for name, value in (("OpenAI-Organization", self.account.organization),
                                ("OpenAI-Project", self.account.project)):
                if value:
                    headers[name] = value
            self._session = aiohttp.ClientSession(
                timeout=self._timeout,
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                headers=headers,
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
            # the connections' transports finish closing on the loop's next turn (aiohttp issue 1925): let it come,
            # or a loop that ends now leaves them to the garbage collector, which warns (a flaky test under load)
            await asyncio.sleep(0)

    def url(self, path: str) -> str:
        """`path` under the base URL; one starting with `//` is under the server's root (`//props`)."""
        if path.startswith("//"):
            return self.root + path[1:]
        return self.base_url + path

    async def request(self, method: str, path: str, *, body: Any = None, data: Any = None,
                      headers: Mapping[str, str] | None = None, timeout_s: float | None = None,
                      max_bytes: int | None = OTHER_REPLY_BYTES) -> tuple[int, object, str, Mapping[str, str]]:
        """Send one request: (status, the reply's JSON or text, its text, its headers).

        Raises ProviderError (no status) when no reply came: refused, dropped or timed out; OutputError
        when the reply passes `max_bytes` (read no further; None: no limit, for a Batch API file) or nests deeper than `_json.MAX_DEPTH`;
        ConfigError for a redirect, which is never followed (a POST is not sent again, to another host
        or the same one).
        """
        session = self._open()
        url = self.url(path)
        send_headers = dict(headers or {})
        payload = data
        if body is not None:
            payload = json.dumps(body).encode()
            send_headers["Content-Type"] = "application/json"
        timeout = aiohttp.ClientTimeout(total=timeout_s) if timeout_s is not None else self._timeout
        try:
            async with session.request(method, url, data=payload, headers=send_headers, proxy=self._proxy,
                                       timeout=timeout, allow_redirects=False) as response:
                status, reply_headers = response.status, dict(response.headers)
                if 300 <= status < 400:
                    raise ConfigError(_redirected(self.base_url, url, status, reply_headers))
                raw = await _read(response, max_bytes, self.base_url)
        except TimeoutError as exc:
            waited = timeout_s if timeout_s is not None else self.timeout_s
            raise ProviderError(f"{self.base_url}: request timed out (after {waited:g} s)",
                                endpoint=self.base_url) from exc
        except aiohttp.ClientProxyConnectionError as exc:
            raise ProviderError(f"{self.base_url}: cannot connect to the proxy {proxy_shown(self._proxy)} "
                                f"({exc.os_error or exc})", endpoint=self.base_url,
                                proxy=proxy_shown(self._proxy)) from exc
        except aiohttp.ClientConnectorError as exc:
            raise ProviderError(f"{self.base_url}: cannot connect to {url} ({exc.os_error or exc})",
                                endpoint=self.base_url) from exc
        except aiohttp.ClientError as exc:
            raise ProviderError(f"{self.base_url}: request connection failed ({exc})", endpoint=self.base_url) from exc
        text = raw.decode("utf-8", errors="replace")
        try:
            parsed: object = loads(text)
        except NoJSON as exc:
            if "nests deeper" in str(exc):
                raise OutputError(f"{self.base_url}{path} answered JSON nested deeper than {MAX_DEPTH} levels; "
                                  "no reply of an OpenAI-compatible API does that: check the endpoint") from None
            parsed = text
        return status, parsed, text, reply_headers

    async def call(self, method: str, path: str, **kw: Any) -> object:
        """`request`, raising HTTPFailure for an error status; the reply's JSON (or text)."""
        status, parsed, text, headers = await self.request(method, path, **kw)
        _check(status, parsed, text, headers)
        return parsed

    async def post(self, path: str, body: Any, headers: Mapping[str, str] | None = None, *,
                   max_bytes: int | None = OTHER_REPLY_BYTES) -> object:
        return await self.call("POST", path, body=body, headers=headers, max_bytes=max_bytes)

    async def get(self, path: str, *, timeout_s: float | None = None) -> object:
        return await self.call("GET", path, timeout_s=timeout_s)

    async def upload(self, path: str, filename: str, content: bytes, **fields: str) -> object:
        """A multipart/form-data POST of one file and some fields (the Files API)."""
        form = aiohttp.FormData()
        for name, value in fields.items():
            form.add_field(name, value)
        form.add_field("file", content, filename=filename, content_type="application/jsonl")
        return await self.call("POST", path, data=form)

    async def text(self, path: str) -> str:
        """The body of a GET as text (a Files API download)."""
        status, parsed, text, headers = await self.request("GET", path, max_bytes=None)  # a batch's results: large
        _check(status, parsed, text, headers)
        return text


async def _read(response: aiohttp.ClientResponse, max_bytes: int | None, base_url: str) -> bytes:
    """The reply's body, read no further than `max_bytes` (None: whole)."""
    if max_bytes is None:
        return await response.read()
    over = OutputError(f"{base_url}: the reply passed {max_bytes:,} bytes and was not read further "
                       "(R3CON_MAX_REPLY_BYTES raises the limit; docs/resilience.md)")
    if response.content_length is not None and response.content_length > max_bytes:
        raise over
    if response.content_length is not None and response.headers.get("Content-Encoding", "identity") == "identity":
        return await response.read()  # read no further than the length told (a compressed body may grow)
    chunks, total = [], 0
    async for chunk in response.content.iter_chunked(1 << 16):
        total += len(chunk)
        if total > max_bytes:
            raise over
        chunks.append(chunk)
    return b"".join(chunks)


def _redirected(base_url: str, url: str, status: int, headers: Mapping[str, str]) -> str:
    """The message for a redirect, which r3con does not follow: where it points, without credentials or query."""
    location = next((v for k, v in headers.items() if k.lower() == "location"), "")
    target = urllib.parse.urlsplit(urllib.parse.urljoin(url, location))
    shown = f"{target.scheme}://{target.hostname or ''}{f':{target.port}' if target.port else ''}{target.path}"
    return (f"{base_url} redirects (HTTP {status}) to {shown if location else 'nowhere'}; r3con follows no redirect "
            "(a request is never sent on to another address): pass that address as --base-url")


def _check(status: int, parsed: object, text: str, headers: Mapping[str, str]) -> None:
    """An error status as an HTTPFailure carrying the server's own words."""
    if status >= 400:
        raise HTTPFailure(status, error_message(parsed, text or f"HTTP {status}"), text[:2000], headers)
