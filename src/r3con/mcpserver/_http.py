"""`r3con mcp --http`: the server over streamable HTTP, on loopback by default, behind a token.

The token is random per start, printed once, and checked on every request (`Authorization: Bearer TOKEN`);
the SDK's transport security checks Host and Origin against the address served, so a web page the user
visits cannot reach the server by DNS rebinding."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError


class TokenRequired:
    """ASGI middleware: an HTTP request without the bearer token gets 401 and reaches nothing."""

    def __init__(self, app: Any, token: str):
        self._app, self._expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"r3con mcp: send Authorization: Bearer TOKEN "
                                                                  b"(the token r3con mcp printed when it started)\n"})
                return
        await self._app(scope, receive, send)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host`:`port` (0: a free port), or a `ConfigError` that says what to change."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        raise ConfigError(f"cannot serve on {host}:{port} ({exc.strerror or exc}); pass another --port "
                          "(0 picks a free one) or --host") from exc
    return sock


async def serve(server: Any, host: str, port: int, announce: Callable[[str], None], token: str | None = None) -> None:
    """Serve `server` (an `MCPServer`) at http://HOST:PORT/mcp until stopped; `announce` gets the lines to print
    (the address and the token)."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    sock = bind(host, port)
    port = sock.getsockname()[1]
    token = token or secrets.token_urlsafe(24)
    shown = f"[{host}]" if ":" in host else host
    names = {shown, "127.0.0.1", "localhost", "[::1]"} if is_loopback(host) else {shown}
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=sorted(f"{n}:{port}" for n in names),
        allowed_origins=sorted(f"{scheme}://{n}:{port}" for n in names for scheme in ("http", "https")))
    app = TokenRequired(server.streamable_http_app(transport_security=security, host=host), token)
    announce(f"r3con mcp: serving MCP at http://{shown}:{port}/mcp")
    announce(f"r3con mcp: token {token} (send it as the header Authorization: Bearer {token})")
    if not is_loopback(host):
        announce(f"r3con mcp: {host} is not loopback: anyone who can reach it and has the token can run r3con "
                 "here, on your files and your model's account")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
