"""How close `r3con estimate --sample N` comes to the run it predicts: calls and prompt tokens, per corpus.

    R3CON_DATA=../shared/data .venv/bin/python bench/bench_estimate.py [--sizes 46,200] [--sample 4] [--json]

For each corpus (D = 46: Dracula's documents, whole; D = 200: Dracula's and Loong's, cut to 16,000
characters, as bench_scale.py builds them) the scripted server runs in another process; the
estimate samples N documents (`estimate.sample`: real relevance, schema and population calls), then
predicts the run, which then runs on the same server. Printed: estimated/actual calls and prompt
tokens, in total and per stage, with the estimate without sampling (150-token notes assumed) beside,
and whether the run falls inside the estimate's 90% range.
The targets: with --sample 4, calls within 10% and prompt tokens within 15% of the run.

    bench/bench_estimate.py --llama /work/shared/llama.cpp --dracula /work/shared/data/dracula/docs \
        [--docs 12,46] [--slots 8192,32768] [--json]

`--llama` measures the commands a user types instead, beside a real llama.cpp server on port 8080
(its tiny random-weight model): for each window (`-c` so that 2 or 4 slots get that many tokens) and
each corpus (the first N Dracula documents), `r3con estimate` with no --base-url (it must find the
server and its window as `run` does), `r3con estimate --sample 4`, then `r3con run --no-cache`; printed:
the calls each predicted against the run's, per stage, and whether the run's calls are in the range.
The target: calls within 15% of the run and inside the stated range.
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
    from r3con.pipeline.estimate import estimate_range, estimate_run
    from r3con.pipeline.estimate import sample as sample_calls
    from r3con.pipeline.method import run

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


LLAMA_PORT = 8080
QUESTION = "Who travels to Transylvania, and why?"


def r3con(*args: str, env: dict[str, str]) -> dict[str, Any]:
    """`r3con ARGS --json` as a user runs it, in a fresh process: its JSON, and its stderr as `stderr`."""
    import os
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "r3con", *args, "--json"], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"r3con {' '.join(args)} failed: {proc.stderr[-2000:]}")
    return {**json.loads(proc.stdout), "stderr": proc.stderr}


def local(llama: Path, dracula: Path, docs: int, slot: int, slots: int = 4) -> dict[str, Any]:
    """estimate (no --base-url), estimate --sample 4, and run, beside llama-server with `slots` slots of `slot` tokens."""
    import subprocess
    import time

    env = {"R3CON_LOCAL_PORTS": str(LLAMA_PORT), "XDG_CACHE_HOME": tempfile.mkdtemp()}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "docs"
        folder.mkdir()
        for path in sorted(dracula.iterdir())[:docs]:
            (folder / path.name).symlink_to(path)
        server = subprocess.Popen([str(llama / "llama-server"), "-m", str(llama / "tiny-random-qwen2-short.gguf"),
                                   "--host", "127.0.0.1", "--port", str(LLAMA_PORT), "-c", str(slot * slots),
                                   "-np", str(slots), "-t", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(3)
            plain = r3con("estimate", QUESTION, str(folder), env=env)
            sampled = r3con("estimate", QUESTION, str(folder), "--sample", "4", env=env)
            ran = r3con("run", QUESTION, str(folder), "--no-cache", "--out", tmp, "--quiet", env=env)
        finally:
            server.terminate()
            server.wait(timeout=10)
    actual = ran["usage"]
    return {
        "docs": docs, "slot": slot, "slots": slots, "endpoint": plain["endpoint"], "parts": plain["parts"],
        "run_parts": sum(1 for _ in ran.get("parts", [])) or None,
        "calls": {"estimate": plain["total"]["calls"], "sampled": sampled["total"]["calls"], "run": actual["calls"]},
        "range": (sampled["range"] or {}).get("calls"),
        "stages": {stage: {"estimate": _calls(plain, stage), "sampled": _calls(sampled, stage),
                           "run": (actual["by_stage"].get(stage) or {}).get("calls", 0)}
                   for stage in dict.fromkeys([s["stage"] for s in plain["stages"] + sampled["stages"]])},
    }


def _calls(estimate: dict[str, Any], stage: str) -> int:
    """A stage's planned calls (0 where the estimate plans none: no population after a failed schema)."""
    return next((s["calls"] for s in estimate["stages"] if s["stage"] == stage), 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama", type=Path, help="a folder with llama-server and tiny-random-qwen2-short.gguf")
    parser.add_argument("--dracula", type=Path, default=Path("../shared/data/dracula/docs"))
    parser.add_argument("--docs", default="12,46")
    parser.add_argument("--slots", default="8192,32768", help="tokens a slot, one measurement each")
    parser.add_argument("--configs", help="DOCS:SLOT pairs to measure instead (12:8192,46:32768)")
    parser.add_argument("--sizes", default="46,200")
    parser.add_argument("--sample", type=int, default=4)
    parser.add_argument("--chars", type=int, default=16_000, help="characters kept of each document beyond Dracula")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.llama is not None:
        pairs = ([tuple(map(int, pair.split(":"))) for pair in args.configs.split(",")] if args.configs else
                 [(docs, slot) for slot in map(int, args.slots.split(",")) for docs in map(int, args.docs.split(","))])
        for docs, slot in pairs:
            row = local(args.llama, args.dracula, docs, slot)
            print(json.dumps(row) if args.json else _local_line(row), flush=True)
        return
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


def _local_line(row: dict[str, Any]) -> str:
    calls, span = row["calls"], row["range"] or {}
    off = calls["estimate"] / max(1, calls["run"]) - 1
    inside = span and span["low"] <= calls["run"] <= span["high"]
    stages = "; ".join(f"{k} {v['estimate']}/{v['sampled']}/{v['run']}" for k, v in row["stages"].items())
    return (f"D={row['docs']}, {row['slots']} slots of {row['slot']:,} (found: window "
            f"{row['endpoint']['context_window']:,}, {row['endpoint']['concurrency']} in flight), {row['parts']} parts: "
            f"calls estimate {calls['estimate']} ({off:+.0%}), --sample 4 {calls['sampled']} "
            f"(range {span.get('low')}-{span.get('high')}: {'inside' if inside else 'OUTSIDE'}), run {calls['run']}; "
            f"per stage estimate/sampled/run: {stages}")


if __name__ == "__main__":
    main()
