"""A pool of three real llama.cpp servers: document affinity pays in the engines' own prefix caches, and a
run where one server is killed mid-run finishes with every document, exit 0."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

import r3con
from r3con.config import Settings, endpoint_flags
from r3con.pipeline.method import run

from ..cli.test_failures import r3con as r3con_cli
from .servers import llama_servers

pytestmark = pytest.mark.usefixtures("clean_env")

TASK = "Which people are named in the documents, and how old are they?"
FILLER = " ".join(f"The harbour ledger for week {w} lists cargo, weather and the names of the crew." for w in range(40))
TEXTS = [(f"Letter {i}", f"Person {i} is {20 + i} years old and lives in town {i}. {FILLER}") for i in range(1, 10)]
SMALL = dict(note_max_tokens=48, populate_max_tokens=48, reason_max_tokens=512, reasoning="direct",
             max_failed_share=1.0, cache=False)


async def test_each_document_stays_on_one_server_and_its_second_round_comes_from_that_servers_cache(tmp_path):
    with llama_servers(3, tmp_path) as servers:
        urls = [f"{s.root}/v1" for s in servers]
        settings = Settings.resolve(env={}, out_dir=tmp_path / "runs", **SMALL, **endpoint_flags(urls))
        result = await run(TASK, r3con.documents_from_texts(TEXTS), settings)
    usage = json.loads((result.run_dir / "usage.json").read_text())
    by_endpoint = {e["base_url"]: e for e in usage["by_endpoint"]}
    assert set(by_endpoint) == set(urls) and all(e["documents"] >= 1 for e in by_endpoint.values())
    assert sum(e["documents"] for e in by_endpoint.values()) == len(TEXTS), "each document on one server"
    assert sum(e["cached_tokens"] for e in by_endpoint.values()) == usage["cached_tokens"]
    assert all(e["errors"] == 0 and e["time_s"] > 0 for e in by_endpoint.values())
    calls = [json.loads(line) for line in (result.run_dir / "calls.jsonl").read_text().splitlines()]
    second = [c for c in calls if c["stage"] == "relevance" and c["round"] == 2 and "error" not in c]
    assert len({c["doc"] for c in second}) >= len(TEXTS) - 2, "most documents' second round was answered"
    for call in second:  # the document (the prompt's head) came from the cache of the server that read it first
        assert call["usage"]["cached_tokens"] >= 0.5 * call["usage"]["prompt_tokens"], call["usage"]


def test_a_run_over_three_servers_where_one_is_killed_mid_run_finishes_with_every_document(
        tmp_path, capsys, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, (title, text) in enumerate(TEXTS * 2, start=1):  # 18 documents
        (docs / f"{i:02d}.txt").write_text(f"{title} ({i})\n\n{text}")
    runs = tmp_path / "runs"
    for name, value in SMALL.items():
        if name != "cache":
            monkeypatch.setenv(f"R3CON_{name.upper()}", str(value))
    with llama_servers(3, tmp_path) as servers:
        victim = servers[1]
        killed_after: list[int] = []

        def kill_when_calls_are_answered() -> None:  # once the run is under way: a third of round 1 answered
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed_after:
                logs = list(runs.glob("*/calls.jsonl"))
                lines = logs[0].read_text().count("\n") if logs else 0
                if lines >= 6:
                    victim.kill()
                    killed_after.append(lines)
                time.sleep(0.05)

        watcher = threading.Thread(target=kill_when_calls_are_answered, daemon=True)
        watcher.start()
        args = ["run", TASK, str(docs), "--out", str(runs), "--no-cache", "--quiet", "--json",
                *(a for s in servers for a in ("--base-url", f"{s.root}/v1"))]
        code, out, err = r3con_cli(capsys, monkeypatch, *args)
        watcher.join(timeout=5)
    assert killed_after, "the server was killed while the run went on"
    assert code == 0 and "Traceback" not in err, err
    folder = Path(json.loads(out)["run_dir"])
    manifest = json.loads((folder / "manifest.json").read_text())
    causes = [d.get("cause", "") for d in manifest["inputs"].get("degraded", [])]
    assert not [c for c in causes if "connect" in c or "pool" in c or "timed out" in c], causes
    usage = json.loads((folder / "usage.json").read_text())
    dead = next(e for e in usage["by_endpoint"] if e["base_url"] == f"{victim.root}/v1")
    assert dead["taken_out"] >= 1 and dead["out"]
    # failed there: the calls in flight when it died (at most its concurrency, 8) and one per later retry of it
    assert 1 <= dead["errors"] <= 8 + dead["taken_out"] - 1
    assert usage["events"].get("failovers", 0) >= 1
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    numbers = {d["doc"] for d in manifest["documents"]}  # stable identities, not positions
    assert len(numbers) == 18
    assert {c["doc"] for c in calls if c["stage"] == "relevance" and c["round"] == 1} == numbers
    errors = [c["error"] for c in calls if "error" in c]
    assert not [e for e in errors if "connect" in e or "pool" in e or "timed out" in e], \
        "the killed server's calls went elsewhere; what failed is the noise model's replies"
    answered = [c["request_hash"] for c in calls if "error" not in c and c["stage"] == "relevance"]
    assert len(answered) == len(set(answered)), "no answered call was sent again"
