"""The app on a free port in a thread of the test process, over real HTTP, with its workspace in a temporary
folder; and plain HTTP requests to it (http.client: the Host and Origin headers are the test's to choose)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path
from typing import Any

from r3con.app import AppState, address, bind, make_server, open_state
from r3con.config import Settings

TOKEN = "test-token-0123456789abcdef"


class RunningApp:
    """`r3con app` as a test starts it: `url` holds the token, `port` the port."""

    def __init__(self, state: AppState):
        self.state = state
        self.sock = bind("127.0.0.1", 0)
        self.port = self.sock.getsockname()[1]
        self.url = address(self.sock, TOKEN)
        self.server = make_server(state, self.sock, TOKEN)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> RunningApp:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the app did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *_: Any) -> None:
        for run in list(self.state.live.values()):
            run.cancel()
        self.server.should_exit = True
        self.thread.join(15)

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                token: bool = True) -> tuple[int, str]:
        """(status, body) of one request; with the token header unless `token` is False."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = {"Host": f"127.0.0.1:{self.port}", **({"X-R3con-Token": TOKEN} if token else {}), **(headers or {})}
        data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        text = response.read().decode("utf-8", "replace")
        conn.close()
        return response.status, text

    def json(self, method: str, path: str, body: Any = None) -> Any:
        status, text = self.request(method, path, body)
        assert status == 200, (status, text)
        return json.loads(text)

    def events(self, run_id: str, timeout: float = 120) -> list[dict[str, Any]]:
        """Every event of a live run, read from its event stream until the final one."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.request("GET", f"/api/live/{run_id}/events", headers={"Host": f"127.0.0.1:{self.port}",
                                                                   "X-R3con-Token": TOKEN})
        response = conn.getresponse()
        events = []
        for raw in response:
            line = raw.decode().strip()
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
        conn.close()
        return events


def demo_state(tmp: Path, base_url: str, folders: list[str], **settings: Any) -> AppState:
    """A workspace under `tmp` asking the scripted server at `base_url`, its cache of its own."""
    resolved = Settings.resolve(env={}, base_url=base_url, api_key="scripted", out_dir=tmp / "ws" / "runs",
                                cache_path=tmp / "cache" / "llm.sqlite", corpus_dir=tmp / "cache" / "corpus",
                                **settings)
    return open_state(tmp / "ws", folders, resolved, demo=True)
