"""The Run API against the real llama.cpp server, where the pieces cross: a run planned for a larger window
than the server's slot learns the real one from its "too long" reply and says so (`replanned`); a cancel ends
it `cancelled`; `r3con.resume` finishes it without paying any request twice; the same question again pays
nothing; one document edited, `--reuse approximate` pays for what changed only."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import r3con

from .conftest import Llama

pytestmark = pytest.mark.usefixtures("clean_env")

QUESTION = "Who writes to whom, and from where?"
CITIES = ("Whitby", "Exeter", "Bistritz", "Varna", "Purfleet", "Hillingham", "Galatz", "Buda-Pesth")


def journal() -> str:
    """Some 12,000 characters, longer than one part of a 2,048-token slot, so a run planned for 8,192 must
    split it again once the server refuses it."""
    days = []
    for day in range(1, 61):
        city = CITIES[day % len(CITIES)]
        days.append(f"{day} May. Arrived at {city} late in the evening; the innkeeper's wife gave me a crucifix "
                    f"and a letter for Mina, which I posted at once. The road to {city} was long and cold.")
    return "Journal of Jonathan Harker\n\n" + "\n".join(days)


def paid(folder: Path) -> Counter[str]:
    """How often each request was paid for (sent to the server and answered), by its hash."""
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines() if line.strip()]
    return Counter(c["request_hash"] for c in calls if not c.get("from_cache") and "error" not in c)


async def sources(run: r3con.Run) -> Counter[str]:
    """Where a run's calls were answered from (`endpoint`, `cache`, `earlier run`), from its events (a note that
    `--reuse approximate` keeps makes no call at all: its run's `reuse` counts it)."""
    got = Counter(e.source for e in [e async for e in run.events()] if e.kind == "call")
    await run.result()
    return got


async def test_a_run_planned_too_large_learns_the_window_then_cancels_resumes_and_reuses(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "01_journal.txt").write_text(journal())
    (docs / "02_letter.txt").write_text("Letter, Mina Murray to Lucy Westenra, from Exeter.\n\n"
                                        "My dearest Lucy, Jonathan writes from Bistritz that he is well.")
    (docs / "03_letter.txt").write_text("Letter, Lucy Westenra to Mina Murray, from Whitby.\n\n"
                                        "Dearest Mina, Arthur came to see us today; Quincey Morris wrote from Texas.")
    with Llama(tmp_path / "server.log", "-c", "2048", "-np", "1") as server:
        settings = r3con.Settings.resolve(base_url=server.url, out_dir=tmp_path / "runs",
                                          cache_path=tmp_path / "cache" / "llm.sqlite", context_window=8192,
                                          note_max_tokens=128, populate_max_tokens=256, reason_max_tokens=256,
                                          max_steps=2, rounds=2)
        run = await r3con.start(QUESTION, [docs], settings)
        assert run.plan.window == 8192
        planned_parts = run.plan.to_dict()["parts"]
        replanned, endpoint = [], 0
        async for event in run.events():
            if event.kind == "replanned":
                replanned.append(event)
            if event.kind == "call" and event.source == "endpoint":
                endpoint += 1
                if endpoint == 8:
                    run.cancel()
        assert run.status == "cancelled"
        with pytest.raises(r3con.RunCancelled):
            await run.result()
        assert replanned and replanned[0].window == 2048, "the slot's size was learned from the server's refusal"
        assert replanned[0].parts > planned_parts, "the journal was split again to fit the slot"

        resumed = await r3con.resume(run.run_dir)
        resumed_from = await sources(resumed)
        assert resumed.status == "finished"
        assert resumed_from["cache"] > 0, "what the cancelled attempt was answered is not asked again"
        assert all(n == 1 for n in paid(run.run_dir).values()), "no request paid twice across cancel and resume"
        assert (run.run_dir / "answer.txt").read_text().strip()

        again = await r3con.start(QUESTION, [docs], settings)
        assert (await sources(again))["endpoint"] == 0, "the same question over the same files pays nothing"

        letter = docs / "03_letter.txt"
        letter.write_text(letter.read_text().replace("Arthur", "Art", 1))
        edited = await r3con.start(QUESTION, [docs], r3con.Settings.resolve(
            **{**settings.public(), "reuse": "approximate", "api_key": settings.api_key}))
        edited_from = await sources(edited)
        assert edited.status == "finished"
        reuse = (await edited.result()).reuse
        assert reuse["counts"]["relevance-1"]["reused"] >= 2, "the two unchanged documents' first reads are kept"
        assert reuse["why"]["relevance-1"]["changed document"] >= 1, "the edited letter is read again"
        assert 0 < edited_from["endpoint"] < sum(resumed_from.values()), "only what the edit touched is paid"
