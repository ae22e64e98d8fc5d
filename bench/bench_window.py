"""Calls and tokens of a whole run by context window: the same 12 Dracula documents at 2k, 4k, 8k and 32k.

    .venv/bin/python bench/bench_window.py [--windows 2048,4096,8192,32768] [--rounds 2] [--json]

Each window runs the whole pipeline (2 relevance rounds, schema, population, the direct answer) against
the scripted server in this process, started with `max_model_len` = the window and asked for nothing
else: r3con reads the window from `/v1/models` as it does from vLLM. The scripted server's replies are
generic (notes quote the document's sentences that share words with the task), so the figures measure
what the plan costs, how many parts and calls and how many prompt tokens, not what a model would
write. Printed per window: the part budget, parts, calls per stage, prompt and completion tokens,
and the documents degraded (a request refused as longer than the window).

The documents are Dracula's 02-04 and 06-14 (../shared/data/dracula/docs; 01 and 05 are left out for
their size, 230k and 323k characters): 101,500 characters, about 25,000 tokens by r3con's estimate.
The figures "before" in bench/README.md come from the same script run against the code before the
change (PYTHONPATH pointing at its src/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("R3CON_DATA") or ROOT.parent / "shared" / "data")
TASK = "Who travelled to Whitby or wrote about it, when, and what did they report there?"
NUMBERS = ("02", "03", "04", "06", "07", "08", "09", "10", "11", "12", "13", "14")


def documents() -> list[Path]:
    folder = DATA / "dracula" / "docs"
    return [next(folder.glob(f"{n}_*.txt")) for n in NUMBERS]


def one(window: int, rounds: int) -> dict[str, object]:
    import r3con
    from r3con.errors import R3conError
    from r3con.pipeline.method import part_budget, run
    from r3con.testing import FakeLLMServer

    docs = r3con.load_corpus([str(p) for p in documents()]).documents
    with FakeLLMServer(max_model_len=window) as server, tempfile.TemporaryDirectory() as tmp:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="bench", out_dir=Path(tmp),
                                          cache=False, rounds=rounds, reasoning="direct", concurrency=8)
        try:
            result = asyncio.run(run(TASK, docs, settings))
        except R3conError as exc:  # the run stopped: what it had spent, from its run folder
            folder = Path(str(exc.run_dir))
            usage = json.loads((folder / "usage.json").read_text())
            manifest = json.loads((folder / "manifest.json").read_text())
            return {
                "window": window, "part_tokens": manifest["part_tokens"],
                "parts": sum(d["parts"] for d in manifest["documents"]), "calls": usage["calls"],
                "by_stage": {s: u["calls"] for s, u in usage["by_stage"].items()},
                "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
                "degraded": None, "failed": f"in {exc.stage}: {str(exc)[:160]}",
            }
        stages = {s: u.calls for s, u in result.by_stage.items()}
        return {
            "window": window, "part_tokens": part_budget(settings, window), "parts": len(result.parts),
            "calls": result.usage.calls, "by_stage": stages, "prompt_tokens": result.usage.prompt_tokens,
            "completion_tokens": result.usage.completion_tokens,
            "degraded": len({f.doc.split(".")[0] for f in result.degraded}),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", default="2048,4096,8192,32768")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [one(int(w), args.rounds) for w in args.windows.split(",")]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| window | part tokens | parts | calls (relevance / schema / populate / reason) | prompt tokens | "
          "completion tokens | documents degraded |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        stages = r["by_stage"]
        assert isinstance(stages, dict)
        split = " / ".join(str(stages.get(s, 0)) for s in ("relevance", "schema", "populate", "reason"))
        print(f"| {r['window']:,} | {r['part_tokens']:,} | {r['parts']} | {r['calls']:,} ({split}) | "
              f"{r['prompt_tokens']:,} | {r['completion_tokens']:,} | "
              f"{r['degraded'] if r.get('failed') is None else 'run failed ' + str(r['failed'])} |")


if __name__ == "__main__":
    main()
