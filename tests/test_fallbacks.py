"""When the model proposes no usable schema or the agent gives no answer, the run still answers from the
notes, says what failed, and records it (`fallbacks` in the manifest and the result, a warning line)."""

from __future__ import annotations

import asyncio
import json

import r3con
from r3con.demo import corpus_dir, question
from r3con.errors import OutputError
from r3con.pipeline import method as pipeline
from r3con.testing import FakeLLMServer, FaultPlan


def _run(server, tmp_path, **kw):
    settings = r3con.Settings.resolve(env={}, base_url=server.base_url, out_dir=tmp_path, cache=False,
                                      retry_base_s=0.01, **kw)
    return asyncio.run(r3con.run(question(), r3con.load_documents([corpus_dir()]), settings))


def test_no_usable_schema_answers_from_the_notes_and_says_so(tmp_path):
    with FakeLLMServer(faults=FaultPlan.parse("empty=1.0,max=1000,only=schema")) as server:
        result = _run(server, tmp_path)
        modes = [c.get("mode") for c in server.calls() if c.get("stage") == "reason"]
    assert result.answer and result.schema is None and result.records == {}
    (used,) = result.fallbacks
    assert used["stage"] == "schema" and "empty" in used["failed"]
    assert used["fallback"] == "answered directly from the notes, without records"
    assert modes and set(modes) == {"direct"}, "no agent without records: one direct answer"
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    saved = json.loads((result.run_dir / "result.json").read_text())
    assert manifest["fallbacks"] == saved["fallbacks"] == [used]


def test_an_agent_that_breaks_is_replaced_by_a_direct_answer(tmp_path, monkeypatch):
    async def broken_agent(*args, **kwargs):
        raise OutputError("the reply was empty after 3 attempts (reason stage); try another model")

    monkeypatch.setattr(pipeline, "answer_with_code", broken_agent)
    with FakeLLMServer() as server:
        result = _run(server, tmp_path)
    assert result.answer and result.records, "the records stay; the answer comes from notes and records"
    (used,) = result.fallbacks
    assert used == {"stage": "reason", "failed": "the reply was empty after 3 attempts (reason stage); try another "
                    "model", "fallback": "answered directly from the notes and the records"}


def test_the_cli_says_what_failed_on_a_warning_line_and_exits_0(capsys, monkeypatch, tmp_path, clean_env):
    from .cli.test_failures import r3con as cli

    with FakeLLMServer(faults=FaultPlan.parse("empty=1.0,max=1000,only=schema")) as server:
        code, out, err = cli(capsys, monkeypatch, "run", question(), str(corpus_dir()), "--base-url",
                             server.base_url, "--out", str(tmp_path), "--no-cache", "--quiet")
    assert code == 0 and out.strip(), err
    lines = err.replace("\n  ", " ").splitlines()  # a warning wraps at 80 columns
    assert [line for line in lines if line.startswith("warning: schema failed")] == [
        "warning: schema failed (the reply was empty after 3 attempts (schema stage); raise the stage's max tokens "
        "or try another model); answered directly from the notes, without records"]
