"""`r3con app [FOLDER ...]`: the browser app (needs r3con[app]); a thin command over `r3con.app.serve`.
cli/app.py adds it to the commands (this module does not import that one: no import cycle)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Any

import typer

from ..config import Settings
from ..errors import ConfigError
from ._inputs import warn_unknown_variables
from ._options import settings_options

APP_OPTIONS = ("model", "base_url", "api_key", "rounds", "reasoning", "context_window", "concurrency", "max_cost",
               "prices", "cache", "no_cache", "reuse")


@settings_options(*APP_OPTIONS)
def app_command(
    folders: Annotated[list[str] | None, typer.Argument(help="Folders of documents to add to the workspace", show_default=False)] = None,
    workspace: Annotated[Path, typer.Option("--workspace", help="The app's own folder: uploaded files, run folders, the folders added")] = Path("r3con-workspace"),
    host: Annotated[str, typer.Option("--host", help="Address to listen on (default 127.0.0.1: this machine only)")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0: a free one)")] = 8765,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Print the address; do not open a browser")] = False,
    demo: Annotated[bool, typer.Option("--demo", help="The scripted offline model and the bundled demo corpus (no model server needed)")] = False,
    flags: dict[str, Any] | None = None,
) -> None:
    """Ask, watch, check and ask again in the browser: a local server on 127.0.0.1 with a token in its address."""
    try:
        from ..app import demo_server, open_state, serve
    except ImportError as exc:
        raise ConfigError("r3con app needs the app extra: pip install 'r3con[app]'") from exc

    warn_unknown_variables()
    with contextlib.ExitStack() as stack:
        given = {k: v for k, v in (flags or {}).items() if v is not None}
        if demo:
            from ..demo import corpus_dir

            given |= {"base_url": stack.enter_context(demo_server()), "api_key": "scripted"}
            folders = [*(folders or []), str(corpus_dir())]
        settings = Settings.resolve(**{**given, "out_dir": workspace.resolve() / "runs"})
        state = open_state(workspace, folders or [], settings, demo=demo)
        with contextlib.suppress(KeyboardInterrupt):
            serve(state, host=host, port=port, open_browser=not no_browser)
