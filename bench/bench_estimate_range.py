"""Does `r3con estimate --sample N` hold the run as often as its range says, when BM25 does not predict relevance?

    R3CON_DATA=../shared/data nice -n 10 .venv/bin/python bench/bench_estimate_range.py \\
        [--sizes 46,200] [--draws 100] [--samples 4,8] [--workers 2] [--out draws.jsonl] [--summary draws.jsonl]

Each draw is one corpus (D = 46: Dracula's documents, whole; D = 200: Dracula's and Loong's, cut to
16,000 characters, as bench_scale.py builds them) with relevance drawn by the scripted server
(`r3con.testing.DrawnRelevance`), independently of the words: a prevalence from 5% to 60%, the
relevant parts scattered uniformly or in 1 or 3 clusters at random places along the BM25 ranking
the estimator spreads its probes over, and in half the draws a fifth of them dropping out in the
last round; a relevant part's note quotes a seeded run of 1 to 6 of its sentences. Per draw and N,
`estimate.sample` measures N documents and `estimate.estimate_range` gives the range at 90%; then the
run itself goes against the same server. Printed: per corpus, N and arrangement, how often the run's
calls and prompt tokens fell inside the range, and the median error of the expected figures. Draws
run in `--workers` processes, each with the scripted server in a thread; every draw's figures are
appended to `--out` as a JSON line (`--summary FILE` prints the table of such a file again).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import TASK, corpus  # noqa: E402

PREVALENCES = (0.05, 0.1, 0.2, 0.3, 0.45, 0.6)
ARRANGEMENTS = {"scattered": 0, "one cluster": 1, "three clusters": 3}


def plan(draw: int) -> dict[str, Any]:
    """The relevance of draw number `draw`: prevalence, arrangement and drop cycle at different periods."""
    arrangement = list(ARRANGEMENTS)[draw % len(ARRANGEMENTS)]
    return {"draw": draw, "share": PREVALENCES[(draw // len(ARRANGEMENTS)) % len(PREVALENCES)],
            "arrangement": arrangement, "drop": 0.2 if (draw // 2) % 2 else 0.0}


def one(size: int, draw: int, samples: list[int], chars: int, confidence: float) -> dict[str, Any]:
    import dataclasses

    import r3con
    from r3con.corpus.documents import split_documents
    from r3con.notes.retrieval import ranking
    from r3con.notes.selection import notes_bm25
    from r3con.pipeline.estimate import estimate_range, sample
    from r3con.pipeline.method import part_budget, run
    from r3con.testing import Behaviour, DrawnRelevance, FakeLLMServer

    how = plan(draw)
    docs = r3con.documents_from_texts(corpus(size, chars))
    row: dict[str, Any] = {"D": size, **how, "estimates": {}}
    with tempfile.TemporaryDirectory() as tmp:
        settings = r3con.Settings.resolve(env={}, base_url="http://127.0.0.1:1/v1", api_key="bench",
                                          out_dir=Path(tmp), cache=False, concurrency=16, context_window=32_768,
                                          max_steps=4, sandbox_timeout_s=120)
        parts = split_documents(docs, part_budget(settings, 32_768))
        ranked = [parts[i].key for i in ranking(notes_bm25([p.text for p in parts]).scores(TASK))]
        relevance = DrawnRelevance.draw(ranked, how["share"], seed=1000 * size + draw,
                                        clusters=ARRANGEMENTS[how["arrangement"]], drop=how["drop"])
        with FakeLLMServer(max_model_len=100_000_000,
                           behaviour=Behaviour(cache_blocks=2_000_000, relevance=relevance)) as server:
            settings = dataclasses.replace(settings, base_url=server.base_url)
            for n in samples:
                assumptions, _ = asyncio.run(sample(TASK, docs, settings, n))
                predicted = asyncio.run(estimate_range(TASK, docs, settings, assumptions, confidence=confidence))
                assert predicted.range is not None
                row["estimates"][str(n)] = {
                    "calls": predicted.range.calls.to_dict(), "prompt_tokens": predicted.range.prompt_tokens.to_dict(),
                    "share": assumptions.relevant_share, "note_tokens": assumptions.note_tokens,
                    "probes": assumptions.probes}
            result = asyncio.run(run(TASK, docs, settings))
    row["parts"] = len(result.parts)
    row["actual"] = {"calls": result.usage.calls, "prompt_tokens": result.usage.prompt_tokens,
                     "share": sum(1 for note in result.notes[0].values() if note) / len(result.parts)}
    return row


def summary(rows: list[dict[str, Any]], confidence: float) -> list[str]:
    """The coverage table: per corpus, N and arrangement (and all together)."""
    out = ["| D | --sample | relevant parts | draws | calls inside | prompt tokens inside | both inside | "
           "median error of expected calls | median error of expected prompt tokens (of the draws' median) | "
           "median range (prompt tokens) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    sizes = sorted({r["D"] for r in rows})
    samples = sorted({int(n) for r in rows for n in r["estimates"]})
    for size in sizes:
        for n in samples:
            for arrangement in [*ARRANGEMENTS, "all"]:
                chosen = [r for r in rows if r["D"] == size and str(n) in r["estimates"]
                          and arrangement in (r["arrangement"], "all")]
                if not chosen:
                    continue
                inside = {key: [_inside(r["estimates"][str(n)][key], r["actual"][key]) for r in chosen]
                          for key in ("calls", "prompt_tokens")}
                both = [a and b for a, b in zip(inside["calls"], inside["prompt_tokens"], strict=True)]
                errors = {key: statistics.median(abs(r["estimates"][str(n)][key]["expected"] / r["actual"][key] - 1)
                                                 for r in chosen) for key in ("calls", "prompt_tokens")}
                middle = statistics.median(abs(r["estimates"][str(n)]["prompt_tokens"]["median"]
                                               / r["actual"]["prompt_tokens"] - 1) for r in chosen)
                widths = statistics.median((e["high"] - e["low"]) / 2 / e["expected"] for r in chosen
                                           for e in [r["estimates"][str(n)]["prompt_tokens"]])
                label = f"**{arrangement}**" if arrangement == "all" else arrangement
                out.append(f"| {size} | {n} | {label} | {len(chosen)} | {_share(inside['calls'])} | "
                           f"{_share(inside['prompt_tokens'])} | {_share(both)} | {errors['calls']:.1%} | "
                           f"{errors['prompt_tokens']:.1%} ({middle:.1%}) | ±{widths:.0%} |")
    out.append(f"(stated confidence {confidence:.0%}; 'inside': low <= actual <= high)")
    return out


def _inside(estimate: dict[str, float], actual: float) -> bool:
    return estimate["low"] <= actual <= estimate["high"]


def _share(flags: list[bool]) -> str:
    return f"{sum(flags)}/{len(flags)} = {sum(flags) / len(flags):.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="46,200")
    parser.add_argument("--draws", type=int, default=100, help="draws per corpus")
    parser.add_argument("--first", type=int, default=0, help="number of the first draw (to add draws to a file)")
    parser.add_argument("--samples", default="4,8")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--chars", type=int, default=16_000, help="characters kept of each document beyond Dracula")
    parser.add_argument("--confidence", type=float, default=0.9)
    parser.add_argument("--out", type=Path, default=Path("estimate_range_draws.jsonl"))
    parser.add_argument("--summary", type=Path, help="print the table of a file of draws and stop")
    args = parser.parse_args()
    if args.summary:
        rows = [json.loads(line) for line in args.summary.read_text().splitlines() if line.strip()]
        print("\n".join(summary(rows, args.confidence)))
        return
    samples = [int(n) for n in args.samples.split(",")]
    jobs = [(int(size), draw) for draw in range(args.first, args.first + args.draws) for size in args.sizes.split(",")]
    rows = []
    with ProcessPoolExecutor(args.workers) as pool, args.out.open("a") as fh:
        futures = [pool.submit(one, size, draw, samples, args.chars, args.confidence) for size, draw in jobs]
        for future in futures:
            row = future.result()
            rows.append(row)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
    print("\n".join(summary(rows, args.confidence)))


if __name__ == "__main__":
    main()
