"""Two checkouts of r3con compared on one bench_scale configuration, their runs alternating.

    .venv/bin/python bench/bench_alternate.py BEFORE AFTER [--rounds 4] [--size 1000] [--layout cache]

BEFORE and AFTER are folders holding a checkout (`git worktree add --detach ../before 9fd0d5c`). Each round
runs bench_scale's configuration (notes budget 4,000 tokens, two rounds, 6,000 characters a document at
D = 1,000) once per checkout, each in its own process with that checkout's src/ first on the path, so the
two see the same machine at about the same time: on a shared machine single runs differ by 20%, and
what is compared is the runs of one set. Prints each run, then per checkout the median and range of the
harness CPU a call and the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

DATA = Path(os.environ.get("R3CON_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
ONE = """
import json, sys
sys.path.insert(0, {bench!r})
import bench_scale
r = bench_scale.one({size}, {layout!r}, "on", 2, 4000, 6000 if {size} > 200 else 16000, 3)
print(json.dumps({{k: r[k] for k in ("calls", "prompt_tokens", "cpu_ms_per_call", "peak_rss_mib", "wall_s")}}))
"""


def run_once(tree: Path, size: int, layout: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "R3CON_DATA": str(DATA)}
    code = ONE.format(bench=str(tree / "bench"), size=size, layout=layout)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--layout", default="cache", choices=("cache", "paper"))
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for n in range(args.rounds):
        for name, tree in trees.items():
            row = run_once(tree, args.size, args.layout)
            runs[name].append(row)
            print(f"round {n + 1} {name}: {json.dumps(row)}", flush=True)
    for name, rows in runs.items():
        cpu = [r["cpu_ms_per_call"] for r in rows]
        print(f"{name} ({trees[name]}): CPU a call median {statistics.median(cpu):.3f} ms "
              f"(range {min(cpu):.3f}-{max(cpu):.3f}), peak RSS {statistics.median(r['peak_rss_mib'] for r in rows):.0f} MiB, "
              f"{rows[0]['calls']:,} calls, {rows[0]['prompt_tokens']:,} prompt tokens")


if __name__ == "__main__":
    main()
