"""What a person sees while a run works: the live progress keeps its counts and cost at 80 columns."""

import pytest
from rich.console import Console

from r3con.display import LiveProgress
from r3con.llm.types import Usage


@pytest.mark.parametrize("width", [80, 100])
def test_live_progress_keeps_counts_and_cost_visible_at_narrow_widths(width):
    console = Console(width=width, record=True, force_terminal=False)
    progress = LiveProgress(console=console, start=False)
    progress.usage(Usage(calls=1234, prompt_tokens=9_876_543, cost_usd=12.3456))
    progress.stage("relevance", 2296)
    for _ in range(1148):
        progress.advance("relevance")
    progress.stage("populate", 1148)
    console.print(progress.display.get_renderable())
    lines = console.export_text().splitlines()
    assert all(len(line) <= width for line in lines)
    relevance = next(line for line in lines if line.startswith("relevance"))
    assert "1148/2296" in relevance and "1234 calls" in relevance and "$12.3456" in relevance
    assert "━" in relevance, "the bar is drawn too"
    assert any(line.startswith("populate") and "0/1148" in line for line in lines)
