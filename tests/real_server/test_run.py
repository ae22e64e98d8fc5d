"""A whole `r3con run` against the real llama.cpp server, whose model writes noise: the run ends the way
a user wants (an answer with every failure accounted for, or exit 1 with one line naming the cause),
never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..cli.test_failures import r3con

pytestmark = pytest.mark.usefixtures("clean_env")


def test_a_run_on_noise_completes_with_every_failure_accounted_for(llama_server, capsys, monkeypatch, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old and lives in Oslo.")
    (docs / "b.md").write_text("# Letter\n\nBob Stone, aged 41, wrote to Ann Lee.")
    (docs / "c.txt").write_text("Census\n\nCara Holm, 29, moved to Bergen.")
    runs = tmp_path / "runs"
    code, out, err = r3con(capsys, monkeypatch, "run", "How old are the people named?", str(docs),
                           "--base-url", llama_server, "--out", str(runs), "--no-cache", "--rounds", "1",
                           "--max-steps", "2", "--quiet")
    assert "Traceback" not in err and code in (0, 1), err
    (folder,) = [p for p in runs.iterdir() if p.is_dir()]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert (manifest["endpoint"]["context_window"], manifest["endpoint"]["context_window_source"]) == \
        (8192, "server: /props n_ctx")
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    assert calls and all(c.get("stage") for c in calls)
    if code == 1:  # the run could not answer: one line with the cause, and where to continue
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("r3con: error: ") and "--resume" in lines[0], err
        assert (folder / "error.json").is_file()
        return
    result = json.loads((folder / "result.json").read_text())
    assert [Path(r["source"]).name for r in result["inputs"]["read"]] == ["a.txt", "b.md", "c.txt"]
    assert all(d["cause"] for d in result["degraded"]), "every degraded document says why"
    warnings = [line for line in err.replace("\n  ", " ").splitlines() if line.startswith("warning: ")]  # wrapped at 80
    for used in result["fallbacks"]:  # what failed, how the run went on, and a warning line for each
        assert used["failed"] and used["fallback"]
        assert any(line.startswith(f"warning: {used['stage']} failed ({used['failed']})") for line in warnings), err
    assert result["answer"] == out.strip() or result["answer"] in out
