"""A server that dies mid-run and comes back: the run waits for it, says so on stderr with until when, and
counts the waits as waits, not retries."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from ..conftest import free_port
from .test_failures import QUESTION, answered, calls_logged, r3con, run_folder


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


def test_a_server_stopped_mid_run_is_noticed_in_seconds_waited_out_and_nothing_is_paid_twice(capsys, monkeypatch,
                                                                                            corpus, tmp_path):
    """SIGSTOP: the server accepts connections and answers nothing, not even a probe (as a hung GPU); one endpoint
    alone has nowhere to move its calls, so they are cancelled and waited out until SIGCONT, not --timeout."""
    runs, port = tmp_path / "runs", free_port()
    server = fake_llm(port)
    monkeypatch.setenv("R3CON_FIRST_BYTE_S", "0.5")
    monkeypatch.setenv("R3CON_PROBE_TIMEOUT_S", "0.5")

    def stop_after_first_answer() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not answered(runs):
            time.sleep(0.02)
        os.kill(server.pid, signal.SIGSTOP)
        time.sleep(4)
        os.kill(server.pid, signal.SIGCONT)

    stopper = threading.Thread(target=stop_after_first_answer)
    stopper.start()
    started = time.monotonic()
    try:
        code, _, err = r3con(capsys, monkeypatch, "run", QUESTION, str(corpus), "--base-url",
                             f"http://127.0.0.1:{port}/v1", "--out", str(runs), "--timeout", "120", "--no-cache")
    finally:
        stopper.join()
        os.kill(server.pid, signal.SIGCONT)
        server.kill()
        server.communicate()
    took = time.monotonic() - started
    assert code == 0, err
    assert took < 40, f"the run took {took:.0f} s: the wedge was waited out by --timeout 120"
    said = [line for line in err.splitlines() if "waiting" in line and "wedged for" in line]
    assert said and all("(no reply, and it answered no liveness probe (GET /models) within 0.5 s (stopped or hung?)"
                        in line and " until " in line for line in said), err
    folder = run_folder(runs)
    events = json.loads((folder / "usage.json").read_text())["events"]
    assert events.get("waits", 0) >= 1 and events.get("retries", 0) == 0, events
    paid = [c["request_hash"] for c in calls_logged(folder) if c.get("error") is None and not c.get("from_cache")]
    assert paid and len(paid) == len(set(paid)), "no answered call was sent (nor paid) twice"
