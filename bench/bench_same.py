"""The same run before and after a change: Dracula (46 documents) with deterministic settings against the
scripted server, in this checkout; prints a SHA-256 of each of the run's outputs (every round's notes,
records.json, answer.txt, schema.json) and of every request it sent (`requests`: their fingerprints, sorted), to
compare across commits.

    python bench/bench_same.py [--data ../shared/data/dracula] [--notes-budget N] [--out digests.json]

`--notes-budget N` (tokens) makes the later rounds and population choose among the notes (at 1,000, on Dracula,
a selection of notes in full and an index), where the default budget shows them all.

Run it on two checkouts (PYTHONPATH=src, or each one's venv) and compare the digests: equal digests mean
the change left the method's results as they were.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import tempfile
from pathlib import Path

QUESTION_ID = "death_toll"


async def main(data: Path, out: Path | None, budget: int | None = None) -> None:
    import r3con
    from r3con.testing import FakeLLMServer

    question = next(q["question"] for q in json.loads((data / "questions.json").read_text())
                    if q["id"] == QUESTION_ID)
    corpus = r3con.load_corpus([str(data / "docs")])
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=Path(tmp) / "runs",
                                          temperature=0.0, cache=False, corpus_store=False,
                                          notes_budget_tokens=budget)
        result = await r3con.run(question, corpus.documents, settings, inputs=corpus.inputs)
        folder = result.run_dir
        files = [*sorted((folder / "notes").glob("round-*.json")), folder / "records.json", folder / "answer.txt",
                 folder / "schema.json"]
        digests = {f.relative_to(folder).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
        with (folder / "calls.jsonl").open(encoding="utf-8") as calls:  # in the order answered: sorted
            sent = sorted(json.loads(line)["request_hash"] for line in calls)
        digests["requests"] = hashlib.sha256("\n".join(sent).encode()).hexdigest()
    digests["calls"] = str(result.usage.calls)
    # what the requests sent and what the scripted server's prefix cache served of it (not digests: the layout moves them)
    digests["prompt_tokens"] = str(result.usage.prompt_tokens)
    digests["cached_tokens"] = str(result.usage.cached_tokens)
    print(json.dumps(digests, indent=1))
    if out is not None:
        out.write_text(json.dumps(digests, indent=1) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("R3CON_DATA", "../shared/data")) / "dracula")
    parser.add_argument("--notes-budget", type=int, help="tokens the notes a call is shown may take")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    asyncio.run(main(args.data, args.out, args.notes_budget))
