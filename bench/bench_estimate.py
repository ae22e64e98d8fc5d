"""How close `r3con estimate --sample N` comes to the run it predicts: calls and prompt tokens, per corpus.

    R3CON_DATA=../shared/data .venv/bin/python bench/bench_estimate.py [--sizes 46,200] [--sample 4] [--json]

For each corpus (D = 46: Dracula's documents, whole; D = 200: Dracula's and Loong's, cut to 16,000
characters, as bench_scale.py builds them) the scripted server runs in another process; the
estimate samples N documents (`estimate.sample`: real relevance, schema and population calls), then
predicts the run, which then runs on the same server. Printed: estimated/actual calls and prompt
tokens, in total and per stage, with the estimate without sampling (150-token notes assumed) beside,
and whether the run falls inside the estimate's 90% range.
The targets: with --sample 4, calls within 10% and prompt tokens within 15% of the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import TASK, corpus, start_server  # noqa: E402


def one(size: int, sample: int, chars: int) -> dict[str, Any]:
    import r3con
    from r3con.estimate import estimate_range, estimate_run
    from r3con.estimate import sample as sample_calls
    from r3con.pipeline import run

    docs = r3con.documents_from_texts(corpus(size, chars))
    server, base_url = start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = r3con.Settings.resolve(env={}, base_url=base_url, api_key="bench", out_dir=Path(tmp), cache=False,
                                              concurrency=16, context_window=32_768, max_steps=4, sandbox_timeout_s=120)
            assumed = asyncio.run(estimate_run(TASK, docs, settings))
            calibrated, _ = asyncio.run(sample_calls(TASK, docs, settings, sample))
            predicted = asyncio.run(estimate_range(TASK, docs, settings, calibrated))
            result = asyncio.run(run(TASK, docs, settings))
    finally:
        server.terminate()
        server.wait(timeout=10)
    actual = result.usage
    stages = {}
    for s in predicted.stages:
        u = result.by_stage.get(s.stage)
        if u is not None:
            stages[s.stage] = {"calls": [s.calls, u.calls], "prompt_tokens": [s.input_tokens, u.prompt_tokens]}
    return {
        "D": size, "parts": len(result.parts), "sample": sample,
        "calls": [predicted.total.calls, actual.calls], "prompt_tokens": [predicted.total.input_tokens, actual.prompt_tokens],
        "calls_ratio": round(predicted.total.calls / max(1, actual.calls), 3),
        "prompt_ratio": round(predicted.total.input_tokens / max(1, actual.prompt_tokens), 3),
        "unsampled_prompt_ratio": round(assumed.total.input_tokens / max(1, actual.prompt_tokens), 3),
        "unsampled_calls_ratio": round(assumed.total.calls / max(1, actual.calls), 3),
        "assumptions": list(predicted.assumptions), "stages": stages,
        "range": None if predicted.range is None else predicted.range.to_dict(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="46,200")
    parser.add_argument("--sample", type=int, default=4)
    parser.add_argument("--chars", type=int, default=16_000, help="characters kept of each document beyond Dracula")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [one(int(size), args.sample, args.chars) for size in args.sizes.split(",")]
    if args.json:
        print(json.dumps(rows))
        return
    for row in rows:
        calls_ok = abs(row["calls_ratio"] - 1) <= 0.10
        prompt_ok = abs(row["prompt_ratio"] - 1) <= 0.15
        print(f"D={row['D']} ({row['parts']} parts), --sample {row['sample']}: calls {row['calls'][0]} estimated / "
              f"{row['calls'][1]} run = {row['calls_ratio']} ({'PASS' if calls_ok else 'FAIL'} within 10%); prompt tokens "
              f"{row['prompt_tokens'][0]:,} / {row['prompt_tokens'][1]:,} = {row['prompt_ratio']} "
              f"({'PASS' if prompt_ok else 'FAIL'} within 15%); without sampling {row['unsampled_calls_ratio']} and "
              f"{row['unsampled_prompt_ratio']}")
        if row["range"]:
            span = row["range"]
            inside = [span[k]["low"] <= actual <= span[k]["high"]
                      for k, actual in (("calls", row["calls"][1]), ("prompt_tokens", row["prompt_tokens"][1]))]
            print(f"    {span['confidence']:.0%} range: calls {span['calls']['low']}-{span['calls']['high']} "
                  f"({'inside' if inside[0] else 'OUTSIDE'}), prompt tokens {span['prompt_tokens']['low']:,}-"
                  f"{span['prompt_tokens']['high']:,} ({'inside' if inside[1] else 'OUTSIDE'})")
        for stage, figures in row["stages"].items():
            print(f"    {stage}: calls {figures['calls'][0]}/{figures['calls'][1]}, "
                  f"prompt tokens {figures['prompt_tokens'][0]:,}/{figures['prompt_tokens'][1]:,}")
        for line in row["assumptions"]:
            print(f"    - {line}")


if __name__ == "__main__":
    main()
