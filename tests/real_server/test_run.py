"""A whole `r3con run` against the real llama.cpp server, whose short model writes noise that ends by
itself: the run finishes (exit 0) with an answer, every failure accounted for, never more requests in
flight than the server has slots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..cli.test_failures import r3con

pytestmark = pytest.mark.usefixtures("clean_env")


def in_flight(calls: list[dict]) -> int:
    """The most requests the server had at once: each answered call's HTTP request ran for its `latency_s`
    before its `end` (its `time` is when the stage asked, before it waited for a free slot)."""
    sent = [c for c in calls if "error" not in c and not c.get("from_cache")]
    edges = sorted([(c["end"] - c["latency_s"], 1) for c in sent] + [(c["end"], -1) for c in sent],
                   key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_a_run_on_noise_completes_with_every_failure_accounted_for(llama_server, capsys, monkeypatch, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old and lives in Oslo.")
    (docs / "b.md").write_text("# Letter\n\nBob Stone, aged 41, wrote to Ann Lee.")
    (docs / "c.txt").write_text("Census\n\nCara Holm, 29, moved to Bergen.")
    for name, text in (("d.txt", "Diary\n\nDan Berg, 52, sailed to Bergen."), ("e.txt", "Note\n\nEva Lund is 23.")):
        (docs / name).write_text(text)
    runs = tmp_path / "runs"
    monkeypatch.setenv("R3CON_NOTE_MAX_TOKENS", "128")  # the short model's replies end by themselves, mostly
    monkeypatch.setenv("R3CON_POPULATE_MAX_TOKENS", "256")
    monkeypatch.setenv("R3CON_REASON_MAX_TOKENS", "512")  # the short model ends sooner, nearly always
    code, out, err = r3con(capsys, monkeypatch, "run", "How old are the people named?", str(docs),
                           "--base-url", llama_server, "--out", str(runs), "--no-cache", "--rounds", "2",
                           "--max-steps", "2", "--quiet")
    assert code == 0 and "Traceback" not in err, err
    (folder,) = [p for p in runs.iterdir() if p.is_dir()]
    manifest = json.loads((folder / "manifest.json").read_text())
    endpoint = manifest["endpoint"]
    assert (endpoint["context_window"], endpoint["context_window_source"]) == (8192, "server: /props n_ctx")
    assert (endpoint["concurrency"], endpoint["concurrency_source"]) == (4, "server: /props total_slots")
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    assert calls and all(c.get("stage") for c in calls)
    assert in_flight(calls) <= 4, "never more requests than the server has slots"
    result = json.loads((folder / "result.json").read_text())
    assert [Path(r["source"]).name for r in result["inputs"]["read"]] == ["a.txt", "b.md", "c.txt", "d.txt", "e.txt"]
    assert len(result["degraded"]) <= 2, "a run that exits 0 lost at most --max-failed-share of its documents"
    assert all(d["cause"] for d in result["degraded"]), "every degraded document says why"
    relevance = [c for c in calls if c["stage"] == "relevance"]
    assert {c["round"] for c in relevance} == {1, 2} and len(relevance) >= 10
    for round_no in (1, 2):
        notes = json.loads((folder / "notes" / f"round-{round_no}.json").read_text())
        numbers = {str(d["doc"]) for d in json.loads((folder / "manifest.json").read_text())["documents"]}
        assert len(numbers) == 5 and {n["doc"] for n in notes} | {d["doc"] for d in result["degraded"]} >= numbers
    usage = json.loads((folder / "usage.json").read_text())
    assert usage["calls"] == result["usage"]["calls"] >= len(relevance)
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    warnings = [line for line in err.replace("\n  ", " ").splitlines() if line.startswith("warning: ")]  # wrapped at 80
    for used in result["fallbacks"]:  # what failed, how the run went on, and a warning line for each
        assert used["failed"] and used["fallback"]
        assert any(line.startswith(f"warning: {used['stage']} failed ({used['failed']})") for line in warnings), err
    if (folder / "schema.json").is_file():  # the model proposed a usable schema: records were populated
        assert "populate" in usage["by_stage"]
    else:
        assert any(f["stage"] == "schema" for f in result["fallbacks"])
    assert result["answer"].strip() and (result["answer"] == out.strip() or result["answer"] in out)
    assert (folder / "answer.txt").read_text().strip() == result["answer"].strip()
