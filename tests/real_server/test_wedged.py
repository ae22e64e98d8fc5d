"""Real llama-servers stopped with SIGSTOP, killed and restarted: a wedged pool member is left in seconds and
let back in by a probe; one server alone that is wedged, or down, is waited for, said on stderr, and counted as
waits."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from dataclasses import replace

from r3con.config import Settings
from r3con.llm.layers.retry import RetryBudget, Retrying, RetryPolicy
from r3con.llm.transport.client import OpenAIChat
from r3con.llm.transport.pool import OUT_S, open_pool, pool_entries
from r3con.llm.types import ChatRequest, Message

from ..cli.test_failures import calls_logged, r3con, run_folder
from .conftest import Llama
from .servers import llama_servers


def ask(doc: int) -> ChatRequest:
    return ChatRequest((Message("user", f"Say something about part {doc}."),), stage="relevance", doc=doc,
                       max_tokens=8)


async def test_a_sigstopped_member_is_left_within_seconds_and_a_probe_lets_it_back_after_sigcont(tmp_path):
    with llama_servers(2, tmp_path, slots=2) as servers:
        urls = [f"{s.root}/v1" for s in servers]
        settings = Settings(base_url=urls[0], base_urls=tuple(urls), first_byte_s=1.0, probe_timeout_s=1.0,
                            request_timeout_s=60)
        pool = await open_pool(settings, pool_entries(settings))
        heard: list[str] = []
        pool.subscribe(heard.append)
        wedged = servers[1]
        try:
            await asyncio.gather(*(pool.complete(ask(d)) for d in range(1, 9)))  # both serve
            os.killpg(wedged.proc.pid, signal.SIGSTOP)
            started = time.monotonic()
            done = await asyncio.wait_for(asyncio.gather(*(pool.complete(ask(d)) for d in range(1, 17))), 30)
            took = time.monotonic() - started
            stats = {s.base_url: s for s in pool.stats()}
            assert stats[urls[1]].out and stats[urls[1]].taken_out == 1
            assert took < 10, f"16 calls took {took:.1f} s with a member stopped"
            assert sum(c.usage.events.get("failovers", 0) for c in done) >= 1
            assert any(line.startswith(f"pool: {urls[1]} is out: it answered no liveness probe") for line in heard)
            os.killpg(wedged.proc.pid, signal.SIGCONT)
            await asyncio.sleep(OUT_S + 0.5)
            before = stats[urls[1]].calls
            await asyncio.wait_for(asyncio.gather(*(pool.complete(ask(d)) for d in range(100, 124))), 30)
            back = {s.base_url: s for s in pool.stats()}[urls[1]]
            assert back.calls > before and not back.out, "after SIGCONT a probe let it back in"
        finally:
            os.killpg(wedged.proc.pid, signal.SIGCONT)
            await pool.aclose()


async def test_a_killed_server_that_restarts_is_waited_for_said_and_counted_as_waits(tmp_path):
    server = Llama(tmp_path / "server.log", "-c", "8192", "-np", "1")
    server.start().wait_ready()
    try:
        chat = OpenAIChat(Settings(base_url=server.url, model="m", request_timeout_s=30))
        layer = Retrying(chat, replace(RetryPolicy(), base_s=1.0, outage_s=60.0), RetryBudget(10), server.url)
        heard: list[str] = []
        layer.retrier.subscribe(heard.append)
        server.stop(kill=True)
        restart = threading.Timer(3.0, server.start)
        restart.start()
        try:
            completion = await asyncio.wait_for(layer.complete(ask(1)), 60)
        finally:
            restart.join()
            await chat.aclose()
        assert completion.usage.events.get("waits", 0) >= 2 and "retries" not in completion.usage.events
        assert heard and all(f"for {server.url} (connection refused: down or loading for" in line
                             or "HTTP 503: down or loading" in line for line in heard), heard
        assert all(" until " in line for line in heard)
    finally:
        server.stop()


def test_a_run_on_one_server_sigstopped_mid_run_finishes_after_sigcont_long_before_the_timeout(clean_env, capsys,
                                                                                             monkeypatch, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"{i}.txt").write_text(f"Letter {i}\n\nPerson {i} is {20 + i} years old and lives in town {i}.")
    runs = tmp_path / "runs"
    for name, value in (("R3CON_NOTE_MAX_TOKENS", "64"), ("R3CON_POPULATE_MAX_TOKENS", "128"),
                        ("R3CON_REASON_MAX_TOKENS", "256"), ("R3CON_FIRST_BYTE_S", "1"), ("R3CON_PROBE_TIMEOUT_S", "1")):
        monkeypatch.setenv(name, value)
    server = Llama(tmp_path / "server.log", "-c", "8192", "-np", "2")
    server.start().wait_ready()
    assert server.proc is not None
    pid = server.proc.pid

    def stop_mid_run() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (runs.is_dir() and any(
                c.get("error") is None for f in runs.iterdir() if f.is_dir() for c in calls_logged(f))):
            time.sleep(0.02)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(5)
        os.kill(pid, signal.SIGCONT)

    stopper = threading.Thread(target=stop_mid_run)
    stopper.start()
    started = time.monotonic()
    try:
        code, _, err = r3con(capsys, monkeypatch, "run", "How old are the people named?", str(docs), "--base-url",
                             server.url, "--out", str(runs), "--no-cache", "--rounds", "2", "--max-steps", "2",
                             "--reasoning", "direct", "--max-failed-share", "1", "--timeout", "120")
    finally:
        stopper.join()
        os.kill(pid, signal.SIGCONT)
        server.stop()
    took = time.monotonic() - started
    assert code == 0 and "Traceback" not in err, err
    assert took < 90, f"the run took {took:.0f} s: its calls waited for --timeout 120"
    said = [line for line in err.splitlines() if "wedged for" in line]
    assert said and all("waiting" in line and f"for {server.url} (no reply, and it answered no liveness probe"
                        in line and " until " in line for line in said), err
    events = json.loads((run_folder(runs) / "usage.json").read_text())["events"]
    assert events.get("waits", 0) >= 1, events
    paid = [c["request_hash"] for c in calls_logged(run_folder(runs)) if c.get("error") is None]
    assert len(paid) == len(set(paid)), "no answered call was sent (nor paid) twice"
