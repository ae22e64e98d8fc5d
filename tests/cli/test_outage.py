"""A server that dies mid-run and comes back: the run waits for it, says so on stderr with until when, and
counts the waits as waits, not retries."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from ..conftest import free_port
from .test_failures import QUESTION, answered, r3con, run_folder


def fake_llm(port: int) -> subprocess.Popen[str]:
    server = subprocess.Popen([sys.executable, "-m", "r3con", "fake-llm", "--port", str(port), "--faults", "delay=0.2"],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stdout.readline().startswith("PORT=")
    return server


def test_a_server_restarted_mid_run_is_waited_for_and_the_wait_is_said(capsys, monkeypatch, corpus, tmp_path):
    runs, port = tmp_path / "runs", free_port()
    servers = [fake_llm(port)]

    def restart_after_first_answer() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not answered(runs):
            time.sleep(0.02)
        servers[0].kill()
        servers[0].communicate()
        time.sleep(4)  # down for 4 s: waits of 1 s and more are said
        servers.append(fake_llm(port))

    restarter = threading.Thread(target=restart_after_first_answer)
    restarter.start()
    try:
        code, _, err = r3con(capsys, monkeypatch, "run", QUESTION, str(corpus), "--base-url",
                             f"http://127.0.0.1:{port}/v1", "--out", str(runs), "--concurrency", "1", "--retries", "1")
    finally:
        restarter.join()
        for server in servers:
            server.kill()
            if server.stdout is not None and not server.stdout.closed:
                server.communicate()  # reaps it and closes its pipe
    assert code == 0, err
    said = [line for line in err.splitlines() if "waiting" in line]
    assert said, err
    assert all("(connection refused: down or loading for" in line and "R3CON_OUTAGE_S) until " in line
               for line in said), said
    events = json.loads((run_folder(runs) / "usage.json").read_text())["events"]
    # with one retry a call, the run finished: the waits (several a call) spent none; the retries are the
    # calls in flight when the server was killed (dropped), retried once each
    assert events.get("waits", 0) >= 2 and events.get("waits", 0) > events.get("retries", 0), events
