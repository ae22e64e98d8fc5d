"""What one call's notes selection costs as the notes grow: ranking only as far as the budget lasts,
against sorting every note.

    .venv/bin/python bench/bench_notes_select.py NOTES.json [--copies 1,4,11] [--budget 4000] [--calls 300]

NOTES.json is a run folder's notes/round-1.json (bench_store.py's D = 10,000 run leaves one with about
4,000 non-empty notes). The notes are copied `--copies` times (each copy with one word dropped from
every note, so that copies differ) to make larger sets: 11 copies of that file give about 45,000
notes, what round 2 of a D = 100,000 run ranks. For each set, `--calls` later-round selections (the
task and a document's own note as the query, that note left out, as relevance does) are made twice:
as r3con makes them (`_Ranked`: one partition, then blocks of the notes that still fit) and with the
block as large as the set (every note that fits sorted, as before). Printed: the median of five
timings of each, in CPU milliseconds a selection, their ratio, and whether every choice is the same.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path

from r3con.corpus.documents import Document
from r3con.notes import selection as notes_module
from r3con.notes.selection import NotesSelector, note_refs

TASK = "Which companies or studies report a growth in revenue, by how much, and in which year?"


def note_set(entries: list[dict[str, str]], copies: int) -> tuple[list[Document], dict[str, str]]:
    rng = random.Random(0)
    docs: list[Document] = []
    notes: dict[str, str] = {}
    for copy in range(copies):
        for entry in entries:
            words = entry["note"].split()
            if copy and len(words) > 1:
                words.pop(rng.randrange(len(words)))
            docs.append(Document(number=len(docs) + 1, title=f"{entry['title']}#{copy}", text=""))
            notes[docs[-1].key] = " ".join(words)
    return docs, notes


async def timed(selector: NotesSelector, notes: dict[str, str], keys: list[str]) -> tuple[float, list[tuple]]:
    started = time.process_time()
    choices = []
    for key in keys:
        choice = await selector.select(f"{TASK}\n{notes[key]}", exclude=key, compact=True)
        choices.append((choice.full, choice.listed, choice.omitted, choice.tokens))
    return 1000 * (time.process_time() - started) / len(keys), choices


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notes", type=Path)
    parser.add_argument("--copies", default="1,4,11")
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    entries = [e for e in json.loads(args.notes.read_text(encoding="utf-8")) if e.get("note")]
    print("notes | blocks ms/select | whole sort ms/select | ratio | same choices")
    for copies in (int(c) for c in args.copies.split(",")):
        docs, notes = note_set(entries, copies)
        keys = list(notes)[:: max(1, len(notes) // args.calls)][: args.calls]
        runs: dict[int, list[float]] = {}
        chosen: dict[int, list[tuple]] = {}
        for block in (notes_module._BLOCK, 10**9):
            notes_module._BLOCK = block
            selector = NotesSelector(note_refs(docs, notes), args.budget)
            await selector.select(TASK, compact=True)  # the index, built once per round
            for _ in range(5):
                ms, chosen[block] = await timed(selector, notes, keys)
                runs.setdefault(block, []).append(ms)
        blocks, whole = (statistics.median(v) for v in runs.values())
        notes_module._BLOCK = min(runs)
        print(f"{len(notes)} | {blocks:.3f} | {whole:.3f} | {whole / blocks:.1f} | "
              f"{chosen[min(runs)] == chosen[10**9]}")


if __name__ == "__main__":
    asyncio.run(main())
