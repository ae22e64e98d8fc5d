"""`r3con mcp`: r3con's tools for agents over the Model Context Protocol (the official `mcp` SDK, the
`r3con[mcp]` extra), on stdio or streamable HTTP.

Tools: `ask` (a run, through the Run API, with progress notifications and cancellation), `estimate`, `runs`,
`records` (read-only SQL over a run's records) and `passage` (a cited passage in its document). Each failure
is the tool's error with r3con's one-line message; the server goes on. The package is named `mcpserver` so
that it never stands in for the SDK's own `mcp` package."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["build", "serve_http", "serve_stdio"]


def build(flags: Mapping[str, Any] | None = None, traced: bool = False) -> Any:
    """The MCP server (an `mcp.server.mcpserver.MCPServer`) with r3con's tools; `flags`: settings every run
    starts from (`Settings.resolve`'s names); `traced`: trace every run `ask` starts (`r3con.otel`)."""
    from ._server import build as built

    return built(flags, traced)


async def serve_stdio(server: Any) -> None:
    """Serve `server` (`build`'s) on stdin and stdout until the client closes them."""
    await server.run_stdio_async()


async def serve_http(server: Any, host: str, port: int, announce: Callable[[str], None],
                     token: str | None = None) -> None:
    """Serve `server` over streamable HTTP at http://HOST:PORT/mcp, behind a token (random unless given);
    `announce` gets the lines to show (the address, the token)."""
    from ._http import serve

    await serve(server, host, port, announce, token)
