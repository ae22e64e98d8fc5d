"""Who may talk to the app: a random token (in the URL printed at start, then a cookie), the Host the server
was bound to (no DNS rebinding) and the page's own Origin (no cross-site request). A refused request is
answered 401 or 403 with one plain line, never a redirect.

The checks are a pure ASGI middleware, so they stand in front of every route, the event stream included.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from ..errors import InputError

COOKIE = "r3con_token"
# no other site may frame the app's pages, and no response is read as another type than it says
SAFE_HEADERS = ((b"x-frame-options", b"SAMEORIGIN"), (b"x-content-type-options", b"nosniff"),
                (b"referrer-policy", b"no-referrer"))
HEADER = b"x-r3con-token"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGI = Callable[[Scope, Receive, Send], Awaitable[None]]


def new_token() -> str:
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The Host headers a browser on this machine sends to the server bound at `host`:`port`."""
    names = {host, "localhost", "127.0.0.1", "[::1]"} if is_loopback(host) else {host}
    if ":" in host and not host.startswith("["):
        names.add(f"[{host}]")
    return frozenset(f"{name}:{port}" for name in names)


class Guard:
    """Checks Host, Origin and the token on every request before the app sees it; sets the cookie on the
    first visit that brought the token in its URL."""

    def __init__(self, app: ASGI, token: str, hosts: frozenset[str]):
        self.app, self.token, self.hosts = app, token, hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        host = headers.get(b"host", b"").decode("latin-1")
        if host not in self.hosts:
            await _refuse(send, 403, "this server answers only to the address it printed (the Host header differs)")
            return
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1") != f"http://{host}":
            await _refuse(send, 403, "requests from other sites are refused (the Origin header differs)")
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        from_query = (query.get("token") or [None])[0]
        given = [from_query, headers.get(HEADER, b"").decode("latin-1") or None, _cookie(headers)]
        if not any(g is not None and hmac.compare_digest(g.encode(), self.token.encode()) for g in given):
            await _refuse(send, 401, "open the address r3con app printed (it holds the token)")
            return
        added = [*SAFE_HEADERS, *([(b"set-cookie", f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                                   .encode("latin-1"))] if from_query is not None else [])]

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *added]
            await send(message)

        await self.app(scope, receive, with_headers)


def _cookie(headers: dict[bytes, bytes]) -> str | None:
    raw = headers.get(b"cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw.decode("latin-1"))
    except Exception:  # a malformed cookie header is no token
        return None
    return jar[COOKIE].value if COOKIE in jar else None


async def _refuse(send: Send, status: int, line: str) -> None:
    body = f"r3con app: {line}\n".encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class OutsideWorkspace(InputError):
    """A path that leaves the folders the app may read (answered 403)."""


def within(path: Path, roots: list[Path]) -> Path:
    """`path` resolved (links followed), if it lies under one of `roots`; else InputError (a path that leaves
    the workspace is never read or written)."""
    resolved = path.resolve()
    for root in roots:
        if resolved == root.resolve() or resolved.is_relative_to(root.resolve()):
            return resolved
    raise OutsideWorkspace(f"{path} is outside the workspace: add its folder first")
