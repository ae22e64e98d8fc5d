"""`r3con mcp`: the MCP server (`r3con.mcpserver`) on stdio, or on streamable HTTP with --http; app.py mounts it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import ConfigError
from ..otel import require as require_otel
from ..otel import wanted as otel_wanted
from ._options import RUN, settings_options


@settings_options(*RUN)
def mcp(
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP at http://HOST:PORT/mcp (a random token, printed, is required on every request) instead of stdio")] = False,
    host: Annotated[str, typer.Option("--host", help="With --http: the address to listen on (default loopback only)")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="With --http: the port (0 picks a free one)")] = 8765,
    out: Annotated[Path | None, typer.Option("--out", help="Folder for run folders, and where `runs` looks (default ./r3con-runs)")] = None,
    otel: Annotated[bool, typer.Option("--otel", help="Send OpenTelemetry traces of the runs `ask` starts (OTLP over HTTP, as the OTEL_* variables say; on by itself when OTEL_EXPORTER_OTLP_ENDPOINT is set; needs r3con[otel])")] = False,
    flags: dict[str, Any] | None = None,
) -> None:
    """Serve r3con's tools (ask, estimate, runs, records, passage) to agents over the Model Context Protocol:
    on stdio for a client that starts it (Claude Desktop, Claude Code), or on HTTP with --http."""
    from .. import mcpserver

    try:
        server = mcpserver.build({**(flags or {}), "out_dir": out}, traced=otel)
    except ImportError as exc:
        raise ConfigError(f"r3con mcp needs the MCP SDK ({exc.name} is not installed): pip install 'r3con[mcp]'") from exc
    if otel_wanted(flag=otel):  # said now, not as the first run's error
        require_otel()
    if http:
        asyncio.run(mcpserver.serve_http(server, host, port, lambda line: print(line, file=sys.stderr, flush=True)))
    else:
        asyncio.run(mcpserver.serve_stdio(server))
