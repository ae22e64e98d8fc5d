"""`ask` over MCP: a run through the Run API with progress notifications, an answer whose citations are the run's
records, and a cancel that leaves the folder resumable."""

import asyncio
import json
import time

import pytest

import r3con
from r3con.testing import FakeLLMServer, FaultPlan

from ..otlp import receiving
from .conftest import DEMO, QUESTION, r3con_mcp, structured


async def test_ask_sends_progress_and_answers_with_the_runs_records_as_citations(fake_server, tmp_path):
    seen: list[tuple[float, str | None]] = []

    async def progress(value, total, message):
        seen.append((value, message))

    async with r3con_mcp("--base-url", fake_server.base_url, "--out", str(tmp_path / "runs"), cwd=tmp_path) as client:
        done = await client.call_tool("ask", {"question": QUESTION, "paths": [str(DEMO)], "rounds": 1},
                                      progress_callback=progress)
    got = structured(done)
    run_dir = tmp_path / "runs" / got["run_dir"].rsplit("/", 1)[-1]
    assert got["answer"] == (run_dir / "answer.txt").read_text().rstrip("\n")
    rows = {row["_id"]: row for table in json.loads((run_dir / "records.json").read_text()).values() for row in table}
    assert got["citations"], "the scripted answer cites records"
    for cited in got["citations"]:
        row = rows[cited["record"]]
        assert (cited["passage"], cited["document"], cited["doc"]) == (row["_passage"], row["_title"], row["_doc"])
    assert got["usage"]["calls"] == json.loads((run_dir / "usage.json").read_text())["calls"]
    values = [v for v, _ in seen]
    assert len(values) > 5 and values == sorted(set(values)), "progress only grows"
    messages = " ".join(m or "" for _, m in seen)
    assert "relevance" in messages and "populate" in messages


async def test_a_cancelled_ask_leaves_a_folder_that_resumes_to_the_answer(tmp_path):
    with FakeLLMServer(faults=FaultPlan(delay_s=0.3)) as server:
        async with r3con_mcp("--base-url", server.base_url, "--out", str(tmp_path / "runs"), "--concurrency", "1",
                             cwd=tmp_path) as client:
            progressed = asyncio.Event()

            async def progress(value, total, message):
                if "relevance: 2" in (message or ""):
                    progressed.set()

            asking = asyncio.ensure_future(client.call_tool("ask", {"question": QUESTION, "paths": [str(DEMO)]},
                                                            progress_callback=progress))
            await asyncio.wait_for(progressed.wait(), 60)
            asking.cancel()  # the SDK's client sends notifications/cancelled
            await asyncio.gather(asking, return_exceptions=True)
            deadline = time.monotonic() + 60
            while True:  # the server cancels the run and waits until its folder is left as a resume expects
                (listed,) = structured(await client.call_tool("runs", {}))["runs"]
                if listed["status"] != "running" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            assert listed["status"] == "cancelled", listed
            assert structured(await client.call_tool("runs", {}))["runs"]  # the server goes on
        before = len(server.calls())
        assert before < 21, "cancelled mid-run, not after it"
        run = await r3con.resume(listed["run_dir"], {"base_url": server.base_url})
        result = await run.result()
    assert result.answer and (result.run_dir / "answer.txt").is_file()
    asked_again = {c["request_hash"] for c in server.calls()[before:]}
    answered = {c["request_hash"] for c in server.calls()[:before] if c["status"] == 200}
    assert len(asked_again & answered) <= 1, "only the call in flight at the cancel is asked again"


async def test_ask_under_otel_sends_the_runs_spans(fake_server, tmp_path):
    pytest.importorskip("opentelemetry.sdk", reason="tracing needs pip install 'r3con[otel]'")
    async with receiving() as receiver:
        async with r3con_mcp("--base-url", fake_server.base_url, "--out", str(tmp_path / "runs"), "--otel",
                             cwd=tmp_path, env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}) as client:
            got = structured(await client.call_tool("ask", {"question": QUESTION, "paths": [str(DEMO)], "rounds": 1}))
            deadline = time.monotonic() + 30
            while not receiver.bodies and time.monotonic() < deadline:  # the spans are exported as the run ends
                await asyncio.sleep(0.05)
    spans = receiver.spans()
    calls = json.loads((tmp_path / "runs" / got["run_dir"].rsplit("/", 1)[-1] / "usage.json").read_text())["calls"]
    assert sum(1 for s in spans if s.name.startswith("chat ")) == calls
    assert [s.name for s in spans if s.name == "invoke_agent r3con"] == ["invoke_agent r3con"]
