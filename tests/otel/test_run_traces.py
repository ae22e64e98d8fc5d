"""A real run traced: the spans the OTLP/HTTP exporter sends for a run against the scripted server."""

import json
from pathlib import Path

import r3con
import r3con.otel as otel

from ..otlp import attributes

DEMO = Path(r3con.__file__).parent / "demo" / "corpus"
QUESTION = (DEMO.parent / "question.txt").read_text().strip()


async def test_a_run_sends_one_span_per_call_whose_tokens_sum_to_usage_json_and_no_document_text(receiver,
                                                                                                  fake_server, tmp_path):
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, out_dir=tmp_path / "runs")
    run = await r3con.start(QUESTION, [DEMO], settings)
    tracing = otel.trace(run)
    result = await run.result()
    await tracing
    spans = receiver.spans()
    calls = [s for s in spans if attributes(s).get("gen_ai.operation.name") == "chat"]
    logged = [json.loads(line) for line in (result.run_dir / "calls.jsonl").read_text().splitlines()]
    usage = json.loads((result.run_dir / "usage.json").read_text())
    assert len(calls) == len(logged) == usage["calls"]
    assert sum(attributes(s)["gen_ai.usage.input_tokens"] for s in calls) == usage["prompt_tokens"]
    assert sum(attributes(s)["gen_ai.usage.output_tokens"] for s in calls) == usage["completion_tokens"]
    stages = {s.span_id: attributes(s)["r3con.stage"] for s in spans if s.name.startswith("r3con ")}
    assert set(stages.values()) == {"relevance", "schema", "populate", "reason"}
    for span in calls:  # each call a child of its own stage's span
        assert stages[span.parent_span_id] == attributes(span)["r3con.stage"]
        assert attributes(span)["gen_ai.request.model"] and attributes(span)["gen_ai.provider.name"]
    (root,) = [s for s in spans if s.name == "invoke_agent r3con"]
    assert attributes(root)["r3con.status"] == "finished" and attributes(root)["r3con.run_dir"] == str(result.run_dir)
    # no document text, question or answer in what was sent: none of the documents' lines, nor the answer
    sent = b"".join(receiver.bodies)
    lines = {line.strip() for doc in DEMO.iterdir() for line in doc.read_text().splitlines() if len(line.strip()) > 25}
    assert lines and not [line for line in lines if line.encode() in sent]
    assert QUESTION.encode() not in sent and result.answer.encode() not in sent


async def test_r3con_run_traces_itself_when_the_environment_names_a_collector(receiver, fake_server, tmp_path):
    import asyncio
    import os
    import sys

    env = {**os.environ, "R3CON_CACHE_PATH": str(tmp_path / "cache.sqlite")}  # OTEL_EXPORTER_OTLP_ENDPOINT: the receiver
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "r3con", "run", QUESTION, str(DEMO), "--base-url", fake_server.base_url,
        "--out", str(tmp_path / "runs"), "--json", "--quiet", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode == 0, err.decode()
    result = json.loads(out)
    logged = (Path(result["run_dir"]) / "calls.jsonl").read_text().splitlines()
    calls = [s for s in receiver.spans() if attributes(s).get("gen_ai.operation.name") == "chat"]
    assert len(calls) == len(logged) > 0
    (root,) = [s for s in receiver.spans() if s.name == "invoke_agent r3con"]
    assert attributes(root)["r3con.status"] == "finished"
