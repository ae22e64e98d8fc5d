"""With no endpoint configured: the local server found on its usual port, said in one line; `r3con servers`."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..config import Settings
from ..display import wrapped
from ..llm.discovery.local import HOW, LocalModel, LocalServer, local_ports, use_local_server, window_hint

__all__ = ["HOW", "found_line", "local_ports", "servers_table", "with_local_server"]


def with_local_server(settings: Settings, *, quiet: bool = False, required: bool = True,
                      ports: Sequence[tuple[int, str]] | None = None) -> Settings:
    """`settings` unchanged when they name an endpoint; else the local server's base URL and model
    (`llm.discovery.local.use_local_server`, which `r3con.run` calls too), said in one line on stderr."""
    settings, server, chosen = use_local_server(settings, local_ports() if ports is None else ports,
                                                required=required)
    if server is not None and chosen is not None and not quiet:
        print(wrapped(f"r3con: {found_line(server, chosen)}"), file=sys.stderr)
    return settings


def found_line(server: LocalServer, model: LocalModel) -> str:
    """"using Ollama at http://127.0.0.1:11434/v1, model llama3.2 (window 4,096 tokens: ...; raise it ...)"."""
    window = f"window {model.window:,} tokens" if model.window else "window not reported"
    source = f" from {model.window_source}" if model.window and model.window_source else ""
    hint = window_hint(server, model)
    return (f"using {server.kind} at {server.base_url}, model {model.id} ({window}{source}"
            f"{'; ' + hint if hint else ''})")


def servers_table(servers: Sequence[LocalServer]) -> list[dict[str, object]]:
    """One row per model of every server found: what `r3con servers --json` prints."""
    return [{"server": s.kind, "base_url": s.base_url, "model": m.id, "loaded": m.loaded, "window": m.window,
             "window_source": m.window_source, "chosen": s.chosen() is m}
            for s in servers for m in s.models]
