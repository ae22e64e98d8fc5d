"""What a run costs, as every place that shows it says it: a known model at its provider's price without a
--prices file, a model with no known price as "price unknown" (never $0.0000), a local server as free."""

import json

import pytest

from r3con.llm import pricing
from r3con.testing import FakeLLMServer

from ..conftest import cli_in_process

QUESTION = "How old are the people named?"


def run_json(server, corpus, tmp_path, *extra):
    proc = cli_in_process("run", QUESTION, str(corpus), "--base-url", server.base_url, "--out", str(tmp_path / "runs"),
                          "--json", *extra)
    return proc, (json.loads(proc.stdout) if proc.returncode == 0 else None)


def shown_costs(data):
    """The cost as usage.json, the manifest and the report of the run folder say it."""
    folder = data["run_dir"]
    from pathlib import Path

    usage = json.loads((Path(folder) / "usage.json").read_text())
    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    report = (Path(folder) / "report.html").read_text()
    return usage, manifest, report


def test_a_known_paid_model_is_priced_without_a_prices_file(corpus, tmp_path):
    with FakeLLMServer(model="gpt-4o-mini") as server:
        proc, data = run_json(server, corpus, tmp_path)
    assert proc.returncode == 0, proc.stderr
    u = data["usage"]
    expected = ((u["prompt_tokens"] - u["cached_tokens"]) * 0.15 + u["cached_tokens"] * 0.075
                + u["completion_tokens"] * 0.60) / 1e6
    assert u["cost_usd"] == pytest.approx(expected, rel=1e-3) and u["cost_usd"] > 0
    usage, manifest, report = shown_costs(data)
    assert usage["cost_usd"] == pytest.approx(expected, rel=1e-3)
    assert manifest["cost"]["prices"] == {"gpt-4o-mini": "genai-prices: OpenAI gpt-4o-mini"}
    assert manifest["cost"]["text"] == f"${expected:.4f}"
    assert f"{expected:.4f}" in report
    assert f"${expected:.4f}" in proc.stderr and "price unknown" not in proc.stderr


def test_an_unknown_model_is_price_unknown_everywhere_never_zero(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(pricing, "is_local_url", lambda url: False)  # as if the server were a provider's, not local
    with FakeLLMServer(model="acme-private-llm") as server:
        proc, data = run_json(server, corpus, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert data["usage"]["cost_usd"] is None and "acme-private-llm" in data["usage"]["cost_unknown"]
    assert all(s["cost_usd"] is None for s in data["usage"]["by_stage"].values())
    usage, manifest, report = shown_costs(data)
    assert usage["cost_usd"] is None and usage["run_folder_cost_usd"] is None
    assert manifest["cost"]["cost_usd"] is None and manifest["cost"]["text"].startswith("price unknown")
    assert "no price for model 'acme-private-llm'" in manifest["cost"]["prices"]["acme-private-llm"]
    assert "price unknown" in report and "0.0000" not in report
    assert "price unknown" in proc.stderr and "$0.0000" not in proc.stderr


def test_max_cost_still_refuses_a_model_with_no_known_price(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(pricing, "is_local_url", lambda url: False)
    with FakeLLMServer(model="acme-private-llm") as server:
        proc, _ = run_json(server, corpus, tmp_path, "--max-cost", "1")
    assert proc.returncode == 2 and "--max-cost needs a price for model 'acme-private-llm'" in proc.stderr


def test_a_local_server_is_shown_as_local_and_free(corpus, tmp_path):
    with FakeLLMServer() as server:  # r3con-scripted on 127.0.0.1: a model no price database knows
        proc, data = run_json(server, corpus, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert data["usage"]["cost_usd"] == 0 and data["usage"]["local_calls"] == data["usage"]["calls"] > 0
    usage, manifest, _ = shown_costs(data)
    assert manifest["cost"]["prices"] == {"r3con-scripted": "local server"}
    assert manifest["cost"]["text"] == "$0 (local server, free)"
    assert "$0 (local server, free)" in proc.stderr
