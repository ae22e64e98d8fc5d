"""A small local llama.cpp server, as users run one on a laptop: a window smaller than r3con was told,
few slots, a restart in the middle of a run, a model that rambles until it is cut. Every test starts
the real llama-server it needs (../shared/llama.cpp) with the short tiny model and tiny reply budgets."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from r3con.config import Settings
from r3con.corpus.documents import load_corpus, split_documents
from r3con.errors import OutputError
from r3con.llm import build_llm
from r3con.pipeline.method import part_budget
from r3con.stages.schema import propose_schema

from ..cli.test_failures import answered, calls_logged, r3con, run_folder
from .conftest import NEVER_ENDING, Llama

pytestmark = pytest.mark.usefixtures("clean_env")
QUESTION = "Who wrote from Whitby, and about what?"


def entries(count: int, start: int = 0) -> str:
    """`count` sentences of a letter; about 27 tokens each by r3con's estimate (29 by the Qwen2 tokenizer)."""
    return " ".join(f"Entry {j}: Mina wrote to Lucy from Whitby about the storm on day {j} and the ship that "
                    "ran aground." for j in range(start, start + count))


def corpus(folder: Path, *sizes: int) -> Path:
    """Documents of `sizes` sentences each, in `folder`."""
    folder.mkdir()
    for i, size in enumerate(sizes, start=1):
        (folder / f"letter{i}.txt").write_text(f"Letter {i}\n\n{entries(size, start=100 * i)}\n")
    return folder


def small(monkeypatch: pytest.MonkeyPatch, note_tokens: int = 128) -> None:
    """Keep a run short on two cores: tiny reply budgets, no structuring, the direct answer."""
    monkeypatch.setenv("R3CON_NOTE_MAX_TOKENS", str(note_tokens))
    monkeypatch.setenv("R3CON_REASON_MAX_TOKENS", "512")  # the answer: cut with nothing complete, it would fail the run
    monkeypatch.setenv("R3CON_STRUCTURING", "false")
    monkeypatch.setenv("R3CON_REASONING", "direct")


def run_json(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text())


def test_a_window_smaller_than_configured_is_learned_from_the_server_and_no_document_is_lost(
        capsys, monkeypatch, tmp_path):
    docs = corpus(tmp_path / "docs", 90, 5)  # the first fits an 8,192 window in one part, not the server's 2,048
    runs = tmp_path / "runs"
    small(monkeypatch)
    with Llama(tmp_path / "server.log", "-c", "2048", "-np", "1") as server:
        code, out, err = r3con(capsys, monkeypatch, "run", QUESTION, str(docs), "--base-url", server.url,
                               "--context-window", "8192", "--out", str(runs), "--no-cache", "--rounds", "1",
                               "--quiet")
    assert code == 0 and "Traceback" not in err, err
    folder = run_folder(runs)
    manifest, result = run_json(folder, "manifest.json"), run_json(folder, "result.json")
    learned = manifest["endpoint"]["learned_window"]
    assert learned["window"] == 2048 and learned["learned_from"][0]["request_tokens"] > 2048, learned
    assert manifest["part_tokens"] == part_budget(Settings(), learned["planning_window"]) < 1000
    assert manifest["documents"][0]["parts"] > 1, "the long document was split for the learned window"
    assert result["degraded"] == [], "no document is lost to a window the server stated"
    notes = run_json(folder, "notes/round-1.json")
    assert {n["doc"].split(".")[0] for n in notes} == {str(d["doc"]) for d in manifest["documents"]}
    assert len(manifest["documents"]) == 2
    refused = [c for c in calls_logged(folder) if "error" in c]
    assert len(refused) == 1 and "exceeds the available context size (2048 tokens)" in refused[0]["error"], refused
    assert out.strip()


@pytest.mark.parametrize("window", [2048, 4096, 8192])
def test_estimate_reads_the_servers_window_and_plans_parts_by_the_stated_rule(window, capsys, monkeypatch, tmp_path):
    docs = corpus(tmp_path / "docs", 300, 40)
    with Llama(tmp_path / "server.log", "-c", str(window), "-np", "1") as server:
        code, out, err = r3con(capsys, monkeypatch, "estimate", QUESTION, str(docs), "--base-url", server.url,
                               "--json")
    assert code == 0, err
    estimate = json.loads(out)
    rule = {2048: 640, 4096: 1280, 8192: 2560}[window]  # half of the window less a quarter and an eighth
    assert part_budget(Settings(), window) == rule
    parts = split_documents(load_corpus([str(docs)]).documents, rule)
    assert estimate["parts"] == len(parts) and any(f"context window {window:,} tokens" in a
                                                   for a in estimate["assumptions"]), estimate


def test_a_server_restarted_mid_run_is_waited_for_through_its_loading_phase(capsys, monkeypatch, tmp_path):
    docs = corpus(tmp_path / "docs", 6, 6, 6, 6)
    runs = tmp_path / "runs"
    small(monkeypatch)
    seen: list[int | None] = []
    server = Llama(tmp_path / "server.log", "-c", "8192", "-np", "2").start().wait_ready()

    def restart() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not answered(runs):
            time.sleep(0.05)
        server.stop(kill=True)
        time.sleep(5)  # down: connections are refused
        server.start()
        while (status := server.health()) != 200:  # loading: HTTP 503 "Loading model"
            seen.append(status)
            time.sleep(0.05)

    restarter = threading.Thread(target=restart)
    restarter.start()
    try:
        code, _, err = r3con(capsys, monkeypatch, "run", QUESTION, str(docs), "--base-url", server.url,
                             "--out", str(runs), "--no-cache", "--rounds", "2", "--quiet")
        restarter.join()
    finally:
        server.stop()
    assert 503 in seen, "the restarted server had a loading phase"
    assert code == 0, err
    folder = run_folder(runs)
    assert run_json(folder, "result.json")["degraded"] == []
    usage = run_json(folder, "usage.json")
    assert usage["events"].get("retries", 0) > 0, "calls waited for the server"
    assert not [c for c in calls_logged(folder) if "error" in c]


def test_a_round_in_which_most_documents_fail_stops_the_run_before_the_next(capsys, monkeypatch, tmp_path):
    docs = corpus(tmp_path / "docs", 4, 130, 4)  # the second is two parts at 8,192 tokens: 4 parts, 3 documents
    runs = tmp_path / "runs"
    small(monkeypatch)
    monkeypatch.setenv("R3CON_OUTAGE_S", "2")
    server = Llama(tmp_path / "server.log", "-c", "8192", "-np", "1").start().wait_ready()

    def kill_after_first_answer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not answered(runs):
            time.sleep(0.02)
        server.stop(kill=True)

    killer = threading.Thread(target=kill_after_first_answer)
    killer.start()
    try:
        code, _, err = r3con(capsys, monkeypatch, "run", QUESTION, str(docs), "--base-url", server.url,
                             "--out", str(runs), "--no-cache", "--rounds", "2", "--concurrency", "1",
                             "--retries", "1")
        killer.join()
    finally:
        server.stop()
    assert code == 1
    line = [x for x in err.splitlines() if x.startswith("r3con: error")][0]
    assert re.search(r"(\d of 3 documents|all 3 documents) failed in relevance", line), line
    assert "connection refused" in line and "--resume" in line, line
    folder = run_folder(runs)
    assert run_json(folder, "manifest.json")["documents"][1]["parts"] == 2
    assert {c.get("round") for c in calls_logged(folder)} == {1}, "round 2 spent nothing"


def test_cut_replies_are_kept_in_the_cache_so_a_second_run_does_not_pay_for_them(llama_server, capsys, monkeypatch,
                                                                                   tmp_path):
    docs = corpus(tmp_path / "docs", *[3] * 8)
    small(monkeypatch, note_tokens=32)
    cache = tmp_path / "llm.sqlite"
    args = ["run", QUESTION, str(docs), "--base-url", llama_server, "--cache", str(cache), "--rounds", "1", "--quiet"]
    code, _, err = r3con(capsys, monkeypatch, *args, "--out", str(tmp_path / "first"))
    assert code == 0, err
    first = calls_logged(run_folder(tmp_path / "first"))
    kept = {c["request_hash"] for c in first if c["stage"] == "relevance" and c.get("finish_reason") == "length"
            and "error" not in c}
    assert kept, "some notes were cut at 32 tokens and kept to their last sentence"
    code, _, err = r3con(capsys, monkeypatch, *args, "--out", str(tmp_path / "second"))
    assert code == 0, err
    second = {c["request_hash"]: c for c in calls_logged(run_folder(tmp_path / "second")) if c["stage"] == "relevance"}
    assert all(second[h]["from_cache"] for h in kept), "every kept cut reply came from the cache"


def test_schema_reasks_stay_within_a_small_window_when_the_model_rambles(tmp_path):
    with Llama(tmp_path / "server.log", "-c", "768", "-np", "1", model=NEVER_ENDING) as server:
        settings = Settings(base_url=server.url, cache=False)

        async def propose() -> None:
            async with build_llm(settings, tmp_path / "calls.jsonl") as llm:
                assert llm.endpoint.context_window == 768
                await propose_schema(llm, QUESTION, f"<notes>\n{entries(6)}\n</notes>", max_attempts=3)

        import asyncio

        with pytest.raises(OutputError, match="no usable schema in 3 attempts"):
            asyncio.run(propose())
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert len(calls) == 3 and not [c for c in calls if "error" in c], calls
    prompts = [c["usage"]["prompt_tokens"] for c in calls]
    replies = [c["usage"]["completion_tokens"] for c in calls]
    assert all(p + r <= 768 for p, r in zip(prompts, replies, strict=True)), (prompts, replies)
    assert max(prompts) - min(prompts) < 150, f"a re-ask carries the error, not the failed reply: {prompts}"
    assert all(c["finish_reason"] == "length" for c in calls), "each rambling reply ran to what the window left"


def test_sigterm_stops_a_run_started_in_the_background_by_a_script(llama_server, tmp_path):
    docs = corpus(tmp_path / "docs", *[3] * 12)
    runs = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    env.update(R3CON_NOTE_MAX_TOKENS="24", R3CON_STRUCTURING="false", R3CON_REASONING="direct")
    pid_file = tmp_path / "pid"
    script = (f'"{sys.executable}" -m r3con run "{QUESTION}" "{docs}" --base-url {llama_server} --out "{runs}" '
              f'--no-cache --concurrency 1 --quiet & echo $! > "{pid_file}"; wait $!')
    shell = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not answered(runs):
        time.sleep(0.05)
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    _, err = shell.communicate(timeout=120)
    assert shell.returncode == 143, err
    folder = run_folder(runs)
    assert f"continue with r3con run --resume {folder}" in err
    assert run_json(folder, "error.json")["kind"] == "interrupted"


def test_a_window_learned_mid_run_with_the_cache_on_finishes_resumes_and_answers_again(
        capsys, monkeypatch, tmp_path):
    """Issue 31: with the LLM cache and the reuse record on (the defaults), a re-split after a learned window
    ended the run (and its resume) in an internal error; now the run, its resume and the same question
    again all end with exit 0, and no call the server answered is paid for twice."""
    docs = corpus(tmp_path / "docs", 90, 5)
    runs = tmp_path / "runs"
    small(monkeypatch)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with Llama(tmp_path / "server.log", "-c", "2048", "-np", "1") as server:
        flags = ["--base-url", server.url, "--context-window", "8192", "--out", str(runs), "--quiet"]
        code, out, err = r3con(capsys, monkeypatch, "run", QUESTION, str(docs), *flags)
        assert code == 0 and "Traceback" not in err and "internal error" not in err, err
        folder = run_folder(runs)
        assert run_json(folder, "manifest.json")["endpoint"]["learned_window"]["window"] == 2048
        first = calls_logged(folder)
        answered_first = {c["request_hash"] for c in first if "error" not in c}
        code, _, err = r3con(capsys, monkeypatch, "run", "--resume", str(folder), "--base-url", server.url,
                             "--quiet")
        assert code == 0 and "internal error" not in err, err
        resumed = calls_logged(folder)[len(first):]
        assert resumed and all(c.get("from_cache") for c in resumed), "the resume sends nothing again"
        code, _, err = r3con(capsys, monkeypatch, "run", QUESTION, str(docs), *flags)
        assert code == 0 and "internal error" not in err, err
    again = sorted(runs.iterdir())[-1]
    paid = [c for c in calls_logged(again) if "error" not in c and not c.get("from_cache")]
    assert not [c for c in paid if c["request_hash"] in answered_first], "the same question again pays nothing twice"
