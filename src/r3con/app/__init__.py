"""`r3con app`: ask, watch, check and ask again, in the browser.

    serve(workspace, folders, ...)   start the local server (127.0.0.1 by default) and say its address

The page is plain HTML, CSS and JavaScript modules under `static/` (no build step); a run's view is the
report's own page (`r3con.report`), rendered from its run folder. See docs/app.md.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import webbrowser
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..config import Settings
from .endpoint import find_endpoint
from .security import allowed_hosts, is_loopback, new_token
from .server import AppState, build
from .workspace import Workspace

__all__ = ["AppState", "address", "bind", "build", "demo_server", "make_server", "open_state", "serve"]


def open_state(root: Path, folders: Sequence[str], settings: Settings, *, demo: bool = False,
               llm: Any = None) -> AppState:
    """The workspace at `root` with `folders` added, and the model server found (or configured)."""
    workspace = Workspace(root)
    for folder in folders:
        workspace.add_folder(folder)
    settings, endpoint = find_endpoint(settings, demo=demo)
    return AppState(workspace, settings, endpoint, demo=demo, llm=llm)


@contextlib.contextmanager
def demo_server() -> Iterator[str]:
    """The scripted offline model (`r3con.testing`) on a free port, for `r3con app --demo`: its base URL."""
    from ..testing import FakeLLMServer

    with FakeLLMServer(port=0) as server:
        yield server.base_url


def bind(host: str, port: int) -> socket.socket:
    """A listening socket at `host`:`port` (0: a free port), made before the server so its address is known."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)  # from here a browser's connection waits for the server instead of being refused
    return sock


def make_server(state: AppState, sock: socket.socket, token: str) -> Any:
    """The uvicorn server of the app on `sock`, answering only to its own address (`security.allowed_hosts`)."""
    import uvicorn

    host, port = sock.getsockname()[:2]
    hosts = allowed_hosts(host, port) | (allowed_hosts("127.0.0.1", port) if host == "0.0.0.0" else frozenset())
    return uvicorn.Server(uvicorn.Config(build(state, token, hosts), log_level="warning", lifespan="off"))


def address(sock: socket.socket, token: str) -> str:
    """The URL the command prints: the server's address with its token."""
    host, port = sock.getsockname()[:2]
    shown = "127.0.0.1" if host == "0.0.0.0" else f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def serve(state: AppState, *, host: str = "127.0.0.1", port: int = 8765, open_browser: bool = True,
          token: str | None = None) -> None:
    """Serve the app until interrupted; print the address with its token (as Jupyter does)."""
    token = token or new_token()
    sock = bind(host, port)
    url = address(sock, token)
    if not is_loopback(host):
        print(f"r3con app: warning: listening on {host}, not only this machine: anyone who can reach it and has "
              "the address below can read the added folders and spend on the model server", file=sys.stderr)
    server = make_server(state, sock, token)
    print(f"r3con app: open {url}", file=sys.stderr)
    print(f"r3con app: workspace {state.workspace.root}; Ctrl-C stops the server", file=sys.stderr)
    if open_browser:
        threading.Timer(0.5, lambda: webbrowser.open(url)).start()
    server.run(sockets=[sock])
