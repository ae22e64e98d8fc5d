"""`--max-cost` through the CLI against the scripted server: the cap is used, kept, and a raised cap finishes."""

import json
import stat

import pytest

from r3con.testing import FakeLLMServer

from ..conftest import cli_in_process

QUESTION = "Who wrote to whom, and when?"
# USD per million tokens, in the ratio of the 9B model's prices (output 1.5x input), large enough to count
PRICES = {"r3con-scripted": {"input": 1.0, "output": 1.5}}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """30 letters: enough calls that one call's worst case is a small part of half the run's cost."""
    folder = tmp_path_factory.mktemp("letters")
    for i in range(1, 31):
        sentence = f"Ann Lee wrote to Bob Stone from Oslo on day {i} about the harbour and the ships that came in. "
        (folder / f"{i:02d}.txt").write_text(f"Letter {i}\n\n" + sentence * 25)
    return folder


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(port=0) as s:
        yield s


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(PRICES))
    return path


def _run(server, corpus, tmp_path, prices, *extra, cache="llm.sqlite"):
    return cli_in_process("run", QUESTION, str(corpus), "--base-url", server.base_url, "--prices", str(prices),
                     "--out", str(tmp_path / "runs"), "--cache", str(tmp_path / cache), "--json", "-q", *extra)


def _chat_calls(server) -> int:
    return sum(1 for c in server.calls() if str(c.get("path", "")).endswith("/chat/completions"))


def _only_folder(tmp_path, exclude=()):
    folders = [p for p in (tmp_path / "runs").iterdir() if p not in exclude]
    assert len(folders) == 1, folders
    return folders[0]


@pytest.fixture(scope="module")
def uncapped(server, corpus, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("uncapped")
    (tmp / "prices.json").write_text(json.dumps(PRICES))
    proc = _run(server, corpus, tmp, tmp / "prices.json", cache="uncapped.sqlite")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("continue_with", ["--resume", "the same command"])
def test_half_the_cost_spends_at_least_90_percent_then_a_raised_cap_finishes_paying_only_the_rest(
        server, corpus, tmp_path, prices, uncapped, continue_with):
    full = uncapped["usage"]["cost_usd"]
    half = full / 2
    capped = _run(server, corpus, tmp_path, prices, "--max-cost", f"{half:.6f}")
    assert capped.returncode == 1, capped.stderr
    (line,) = capped.stderr.strip().splitlines()
    assert "--max-cost" in line and "raise --max-cost" in line and "--resume" in line
    folder = _only_folder(tmp_path)
    spent = json.loads((folder / "usage.json").read_text())["cost_usd"]
    # all but about one call's expected cost (a reply claiming more is settled against what is left)
    assert 0.9 * half <= spent <= half, f"spent {spent / half:.1%} of the cap"
    assert (folder / "notes" / "round-1.json").is_file(), "what was done is kept"

    raised = f"{1.5 * full:.6f}"
    if continue_with == "--resume":
        rerun = cli_in_process("run", "--resume", str(folder), "--base-url", server.base_url, "--max-cost", raised,
                          "--json", "-q")
    else:
        rerun = _run(server, corpus, tmp_path, prices, "--max-cost", raised)
    assert rerun.returncode == 0, rerun.stderr
    result = json.loads(rerun.stdout)
    assert result["answer"] == uncapped["answer"]
    assert result["usage"]["cost_usd"] == pytest.approx(full - spent, rel=0.02), "paid only for the rest"
    assert result["usage"]["cache_hits"] > 0
    if continue_with == "--resume":
        assert result["run_dir"] == str(folder)
        usage = json.loads((folder / "usage.json").read_text())
        assert usage["run_folder_cost_usd"] == pytest.approx(full, rel=0.02)
        assert not (folder / "error.json").exists()
        attempts = json.loads((folder / "manifest.json").read_text())["attempts"]
        assert len(attempts) == 2 and attempts[0]["error"].startswith("BudgetExceeded")


@pytest.mark.parametrize("resume_cap", [1.0, 0.5])  # the same cap, and one below what was spent
def test_resuming_a_spent_folder_without_raising_the_cap_says_to_raise_it_and_calls_nothing(
        server, corpus, tmp_path, prices, uncapped, resume_cap):
    cap = uncapped["usage"]["cost_usd"] / 3
    assert _run(server, corpus, tmp_path, prices, "--max-cost", f"{cap:.6f}").returncode == 1
    folder = _only_folder(tmp_path)
    kept = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name not in (
        "manifest.json", "usage.json", "error.json", "calls.jsonl", "report.html")}  # report.html: rebuilt from them
    log = (folder / "calls.jsonl").read_bytes()
    calls = _chat_calls(server)
    again = cli_in_process("run", "--resume", str(folder), "--base-url", server.base_url,
                      "--max-cost", f"{cap * resume_cap:.6f}", "-q")
    assert again.returncode == (1 if resume_cap == 1.0 else 2), again.stderr
    (line,) = again.stderr.strip().splitlines()
    assert "already spent" in line and "raise --max-cost" in line
    assert _chat_calls(server) == calls
    assert {p: p.read_bytes() for p in kept} == kept, "what was done is untouched"
    assert (folder / "calls.jsonl").read_bytes().startswith(log), "the call log is only appended to"


def test_a_model_without_a_price_exits_2_before_any_call_and_says_how_to_add_one(server, corpus, tmp_path, monkeypatch):
    from r3con.llm import pricing

    monkeypatch.setattr(pricing, "is_local_url", lambda url: False)  # a provider's endpoint: not local, so not free
    calls = _chat_calls(server)
    proc = cli_in_process("run", QUESTION, str(corpus), "--base-url", server.base_url, "--max-cost", "1",
                     "--out", str(tmp_path / "runs"), "--no-cache")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "'r3con-scripted'" in line and "--prices FILE" in line and "R3CON_PRICES_FILE" in line
    assert '"input"' in line, "the message shows the JSON shape"
    assert _chat_calls(server) == calls, "no call was made"
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir()), "no empty run folder"


def test_every_file_of_a_run_folder_is_private(server, corpus, tmp_path, prices):
    proc = _run(server, corpus, tmp_path, prices)
    assert proc.returncode == 0, proc.stderr
    folder = _only_folder(tmp_path)
    paths = [folder, *folder.rglob("*")]
    assert {"calls.jsonl", "answer.txt", "manifest.json", "usage.json"} <= {p.name for p in paths}
    exposed = [f"{p.relative_to(folder)} {stat.filemode(p.stat().st_mode)}" for p in paths
               if not p.is_symlink() and p.stat().st_mode & 0o077]
    assert exposed == []


def test_calls_jsonl_keeps_every_reply_and_one_request_per_template_by_default(server, corpus, tmp_path, prices):
    sizes, logs = {}, {}
    for mode in ("full", "compact", "meta"):
        out = tmp_path / mode
        proc = cli_in_process("run", QUESTION, str(corpus), "--base-url", server.base_url, "--prices", str(prices),
                         "--out", str(out), "--no-cache", "-q", *(["--log-calls", mode] if mode != "compact" else []))
        assert proc.returncode == 0, proc.stderr
        (folder,) = out.iterdir()
        sizes[mode] = (folder / "calls.jsonl").stat().st_size
        logs[mode] = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    assert len(logs["full"]) == len(logs["compact"]) == len(logs["meta"]), "every call is logged in every mode"
    assert all("response" in c and "usage" in c for c in logs["compact"])
    with_request = [c["prompt_hash"] for c in logs["compact"] if "request" in c]
    assert len(with_request) == len(set(with_request)) >= 3, "one full request per prompt template"
    assert all("request" not in c and "response" not in c and "usage" in c for c in logs["meta"])
    assert sizes["meta"] < sizes["compact"] < sizes["full"] / 2, sizes
