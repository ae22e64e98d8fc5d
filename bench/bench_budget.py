"""How much of `--max-cost` a run uses before it stops, what a raised-cap rerun pays, and calls.jsonl sizes.

    .venv/bin/python bench/bench_budget.py [--data DIR] [--caps 0.05,half,0.08] [--model gpt-4o-mini] [--no-sizes] [--json]

Runs `r3con run` (the CLI, in a subprocess) on a corpus (default: $R3CON_DATA/dracula/docs, else
../shared/data/dracula/docs) against the scripted server serving `--model`: gpt-4o-mini (the default) is priced
from genai-prices as OpenAI bills it; `qwen3.5-9b` with a --prices file at OpenRouter's 2026-09 price for the 9B
($0.10/$0.15 per million; the scripted server is local, so it would be free). First an uncapped run; then, for each cap, a capped run with a fresh LLM cache
(spent/cap), and `--resume` of its folder with the cap raised to 1.5x the uncapped cost (what the
rerun paid against what was left, and whether the answer is the uncapped run's). Finally three
uncached runs with `--log-calls full|compact|meta` and the size of each calls.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from r3con.testing import FakeLLMServer

QUESTION = ("On the voyage to England and during his stay there, how many people did Dracula kill, either "
            "directly or indirectly, and who were they?")


def r3con(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "r3con", *args], capture_output=True, text=True, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = Path(os.environ.get("R3CON_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--data", type=Path, default=root / "dracula" / "docs")
    parser.add_argument("--caps", default="0.05,half,0.08")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--no-sizes", action="store_true", help="skip the calls.jsonl sizes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out: dict[str, Any] = {"corpus": str(args.data), "model": args.model, "caps": []}
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(port=0, model=args.model) as server:
        work = Path(tmp)
        prices = work / "prices.json"
        prices.write_text(json.dumps({"qwen3.5-9b": {"input": 0.10, "output": 0.15}}))

        def run(*extra: str, cache: str, runs: str = "runs") -> subprocess.CompletedProcess[str]:
            return r3con("run", QUESTION, str(args.data), "--base-url", server.base_url, "--out", str(work / runs),
                         "--cache", str(work / cache), "--json", "-q", "--prices", str(prices), *extra)

        full = run(cache="uncapped.sqlite")
        assert full.returncode == 0, full.stderr
        uncapped = json.loads(full.stdout)
        cost = uncapped["usage"]["cost_usd"]
        out["uncapped_usd"] = cost
        for i, text in enumerate(args.caps.split(",")):
            cap = cost / 2 if text == "half" else float(text)
            capped = run("--max-cost", f"{cap:.6f}", cache=f"capped-{i}.sqlite", runs=f"runs-{i}")
            folder = next((work / f"runs-{i}").iterdir())
            usage = json.loads((folder / "usage.json").read_text())
            spent = usage["cost_usd"]
            rerun = r3con("run", "--resume", str(folder), "--base-url", server.base_url,
                          "--max-cost", f"{1.5 * cost:.6f}", "--json", "-q", "--prices", str(prices))
            resumed = json.loads(rerun.stdout) if rerun.returncode == 0 else {}
            out["caps"].append({
                "cap_usd": round(cap, 6), "exit": capped.returncode, "spent_usd": spent, "precision": spent / cap,
                "capped_replies": usage.get("events", {}).get("usage_capped", 0),
                "rerun_exit": rerun.returncode, "rerun_paid_usd": resumed.get("usage", {}).get("cost_usd"),
                "left_usd": cost - spent, "same_answer": resumed.get("answer") == uncapped["answer"],
            })
        sizes = {}
        for mode in () if args.no_sizes else ("full", "compact", "meta"):
            done = run("--log-calls", mode, "--no-cache", cache="none.sqlite", runs=f"log-{mode}")
            assert done.returncode == 0, done.stderr
            sizes[mode] = next((work / f"log-{mode}").iterdir()).joinpath("calls.jsonl").stat().st_size
        out["calls_jsonl_bytes"] = sizes
        out["calls"] = uncapped["usage"]["calls"]
    if args.json:
        print(json.dumps(out))
        return
    print(f"{out['corpus']}, {out['model']}: uncapped run ${cost:.4f}, {out['calls']} calls")
    print(f"{'cap':>9} {'exit':>4} {'spent':>9} {'spent/cap':>9} {'capped replies':>14} {'rerun paid':>10} {'left':>9} "
          "same answer")
    for c in out["caps"]:
        paid = "n/a" if c["rerun_paid_usd"] is None else f"${c['rerun_paid_usd']:.4f}"
        print(f"${c['cap_usd']:>8.4f} {c['exit']:>4} ${c['spent_usd']:>8.4f} {c['precision']:>9.1%} "
              f"{c['capped_replies']:>14} {paid:>10} "
              f"${c['left_usd']:>8.4f} {c['same_answer']}")
    print("calls.jsonl: " + ", ".join(f"{m} {b / 1e6:.2f} MB" for m, b in sizes.items()))


if __name__ == "__main__":
    main()
