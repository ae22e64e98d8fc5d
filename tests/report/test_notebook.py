"""r3con in a notebook: the blocking `r3con.ask` called from a cell (inside the kernel's running event loop), and
the `RunResult` it returns shown as HTML (the answer, its citations, the usage; escaped) and as a short repr."""

import dataclasses
import html
from pathlib import Path

import r3con
from r3con.evidence.citations import Evidence

from .hostile import HOSTILE_REPLY

DEMO = Path(r3con.__file__).parent / "demo" / "corpus"
QUESTION = (DEMO.parent / "question.txt").read_text().strip()


async def test_ask_blocks_inside_a_running_loop_and_its_result_shows_as_html_and_a_short_repr(fake_server, tmp_path):
    # an `async def` test runs inside pytest-asyncio's loop, as a Jupyter cell runs inside the kernel's
    result = r3con.ask(QUESTION, DEMO, base_url=fake_server.base_url, out_dir=tmp_path / "runs", rounds=1)
    assert result.answer == (result.run_dir / "answer.txt").read_text().rstrip("\n")
    page = result._repr_html_()
    assert html.escape(result.answer, quote=False) in page
    assert result.evidence and all(e.id in page for e in result.evidence[:10])
    usage = result.usage
    assert f"{usage.calls} calls ({usage.prompt_tokens:,} input and {usage.completion_tokens:,} output tokens)" in page
    text = repr(result)
    assert "\n" not in text and len(text) < 400 and str(result.run_dir) in text and f"calls={usage.calls}" in text

    hostile = dataclasses.replace(result, answer=HOSTILE_REPLY, evidence=(
        Evidence(id="R1.1.1", kind="record", doc=1, title="<b>t</b>", passage=HOSTILE_REPLY, span=None, match="none"),))
    page = hostile._repr_html_()
    assert "<script" not in page and "<img" not in page and "<b>t</b>" not in page
    assert "&lt;script" in page and "&lt;b&gt;t&lt;/b&gt;" in page
    long = dataclasses.replace(result, answer="word " * 10_000)
    assert len(repr(long)) < 400  # a long answer is cut in the repr (asyncio formats a task's result into messages)
