"""With no endpoint configured: the local server found on its usual port, said in one line; `r3con servers`."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence

from ..config import Settings
from ..display import wrapped
from ..errors import ConfigError
from ..llm.local import PORTS, LocalModel, LocalServer, find_servers, window_hint

HOW = "start one (Ollama, llama.cpp, vLLM, SGLang, LM Studio), or set OPENAI_BASE_URL or pass --base-url"


def local_ports(env: Mapping[str, str] | None = None) -> tuple[tuple[int, str], ...]:
    """The ports to look on: R3CON_LOCAL_PORTS ("8080,11434=Ollama"; empty: none) or the usual ones."""
    env = os.environ if env is None else env
    raw = env.get("R3CON_LOCAL_PORTS")
    if raw is None:
        return PORTS
    ports = []
    for item in filter(None, (i.strip() for i in raw.split(","))):
        port, _, kind = item.partition("=")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"R3CON_LOCAL_PORTS={raw!r}: {item!r} is no port; give PORT or PORT=NAME, "
                              "separated by commas")
        ports.append((int(port), kind.strip() or "a server"))
    return tuple(ports)


def with_local_server(settings: Settings, *, quiet: bool = False, required: bool = True,
                      ports: Sequence[tuple[int, str]] | None = None) -> Settings:
    """`settings` unchanged when they name an endpoint; else the local server's base URL and model.

    ConfigError when none listens (unless not `required`: then `settings` unchanged), when several do,
    or when the server offers several models and none is chosen with --model or loaded; one line on
    stderr says what was found.
    """
    if settings.base_url or settings.pool_file is not None:  # an endpoint, or a pool file naming its own
        return settings
    ports = local_ports() if ports is None else ports
    if not ports and required:
        settings.require_endpoint()
    servers = asyncio.run(find_servers(ports)) if ports else ()
    if not servers and not required:
        return settings
    if not servers:
        looked = ", ".join(f"{port} ({kind})" for port, kind in ports)
        raise ConfigError(f"no endpoint configured and no local server answers on ports {looked}: {HOW}")
    if len(servers) > 1:
        found = "; ".join(f"{s.kind} at {s.base_url}" for s in servers)
        raise ConfigError(f"{len(servers)} local servers answer ({found}): pass the one to use with --base-url")
    server = servers[0]
    if not server.models:
        raise ConfigError(f"{server.kind} at {server.base_url} serves no model: load one, or pass --base-url")
    chosen = server.model(settings.model) if settings.model else server.chosen()
    if chosen is None and settings.model:
        raise ConfigError(f"{server.kind} at {server.base_url} does not serve the model {settings.model}; "
                          f"it serves {_names(server.models)}: pass one of them with --model")
    if chosen is None:
        raise ConfigError(f"{server.kind} at {server.base_url} serves {len(server.models)} models "
                          f"({_names(server.models)}) and none alone is loaded: pass one with --model")
    if not quiet:
        print(wrapped(f"r3con: {found_line(server, chosen)}"), file=sys.stderr)
    return dataclasses.replace(settings, base_url=server.base_url, model=chosen.id)


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


def _names(models: Sequence[LocalModel], limit: int = 12) -> str:
    names = [m.id + (" (loaded)" if m.loaded else "") for m in models]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
