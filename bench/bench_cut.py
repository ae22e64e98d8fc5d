"""What a reply cut at max_tokens costs: completion tokens and seconds per call against a real server.

    .venv/bin/python bench/bench_cut.py --base-url http://127.0.0.1:8080/v1 [--calls 4] [--json]

Start llama.cpp's server with the tiny random-weight model whose replies never end (../shared/llama.cpp,
`-c 32768 -np 4`): every reply runs to max_tokens, as a small model's rambling or looping one can. Sends
`--calls` note requests (free text, the relevance stage's max_tokens) and as many record requests
(a records schema, the population stage's max_tokens) through the whole LLM stack (`build_llm`, cache
off) and prints, per kind, the median completion tokens and seconds per call and what came of them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from r3con.config import Settings
from r3con.errors import R3conError
from r3con.llm import ChatRequest, Message, Usage, build_llm

RECORDS = {"type": "object", "properties": {"records": {"type": "array", "items": {
    "type": "object", "properties": {"name": {"type": "string"}, "_passage": {"type": "string"}},
    "required": ["name", "_passage"]}}}, "required": ["records"]}


async def one(llm, request: ChatRequest) -> dict:
    started = time.perf_counter()
    try:
        completion = await llm.complete(request)
        outcome, usage = ("kept (cut)" if completion.finish_reason == "length" else "ok"), completion.usage
    except R3conError as exc:
        outcome, usage = type(exc).__name__, exc.usage
    tokens = usage.completion_tokens if isinstance(usage, Usage) else 0
    return {"tokens": tokens, "seconds": time.perf_counter() - started, "outcome": outcome}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="max_tokens of every request (default: the stages' note_max_tokens, populate_max_tokens)")
    parser.add_argument("--max-tokens-cap", type=int, default=None, help="R3CON_MAX_TOKENS_CAP (default 4096)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="r3con-bench-cut-"))
    settings = Settings.resolve(env={}, base_url=args.base_url, cache=False, out_dir=out, concurrency=4,
                                max_tokens_cap=args.max_tokens_cap)
    text = "Mina wrote to Lucy about the storm at Whitby. " * 40
    kinds = {
        "note": lambda i: ChatRequest(messages=(Message("user", f"{i}: What happened at Whitby?\n{text}"),),
                                      stage="relevance", doc=i,
                                      max_tokens=args.max_tokens or settings.note_max_tokens, temperature=1.0),
        "records": lambda i: ChatRequest(messages=(Message("user", f"{i}: List the people.\n{text}"),),
                                         stage="populate", doc=i,
                                         max_tokens=args.max_tokens or settings.populate_max_tokens,
                                         temperature=1.0, response_schema=RECORDS, schema_name="records"),
    }
    results = {}
    async with build_llm(settings, out / "calls.jsonl") as llm:
        for kind, make in kinds.items():
            rows = await asyncio.gather(*(one(llm, make(i)) for i in range(args.calls)))
            results[kind] = {
                "max_tokens": make(0).max_tokens,
                "median_tokens": statistics.median(r["tokens"] for r in rows),
                "median_seconds": round(statistics.median(r["seconds"] for r in rows), 2),
                "outcomes": sorted(r["outcome"] for r in rows),
            }
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for kind, r in results.items():
        print(f"{kind}: max_tokens {r['max_tokens']}, median {r['median_tokens']} completion tokens and "
              f"{r['median_seconds']} s a call; {', '.join(r['outcomes'])}")


if __name__ == "__main__":
    asyncio.run(main())
