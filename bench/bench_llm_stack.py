"""The LLM stack's own CPU a call: a run's requests sent again through `build_llm`, nothing else of a run.

    PYTHONPATH=src .venv/bin/python bench/bench_llm_stack.py CALLS_JSONL [--reps 3] [--concurrency 16] [--profile OUT]

CALLS_JSONL is the calls.jsonl of a run made with `--log-calls full` (every request kept), for example
`r3con run ... --log-calls full` on bench_engine's corpus. Each repetition opens a fresh stack (an empty LLM
cache and call log in a temporary folder, compact as a run logs) against the scripted server in its own process,
and sends every logged request again through it, `--concurrency` at a time: the layers, the cache, the call log
and the HTTP transport, as a run's calls go through them. Printed per repetition: calls, CPU ms a call of this
process alone (user + system, the server's not counted), wall; then the median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from r3con.config import Settings
from r3con.llm import ChatRequest, Message, build_llm


def requests_of(calls_log: Path) -> list[ChatRequest]:
    """The requests a full call log holds, as the stages asked them."""
    out, schemas = [], {}  # a schema held once, as a stage holds the one it asks every call with
    for line in calls_log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        sent: dict[str, Any] | None = record.get("request")
        if not sent:
            continue
        messages = []
        for m in sent["messages"]:
            content = m["content"]
            marked = isinstance(content, list)
            text = "".join(part["text"] for part in content) if marked else content
            messages.append(Message(m["role"], text, cache_breakpoint=marked))
        out.append(ChatRequest(
            messages=tuple(messages), stage=record["stage"], doc=record.get("doc"), part=record.get("part"),
            round=record.get("round"), mode=record.get("mode"), model=sent.get("model"), max_tokens=sent.get("max_tokens"),
            temperature=sent.get("temperature"),
            response_schema=schemas.setdefault(json.dumps(sent.get("response_schema")), sent.get("response_schema")),
            schema_name=sent.get("schema_name") or "output", prompt_name=record.get("prompt") or "",
            prompt_hash=record.get("prompt_hash") or "", sample=sent.get("sample") or 0,
            extra_body=sent.get("extra_body") or {}))
    return out


async def one(base_url: str, requests: list[ChatRequest], concurrency: int, folder: Path) -> tuple[float, float]:
    settings = Settings(base_url=base_url, concurrency=concurrency, cache_path=folder / "llm.sqlite",
                        out_dir=folder, retries=0)
    async with build_llm(settings, folder / "calls.jsonl") as stack:
        queue = list(reversed(requests))

        async def worker() -> None:
            while queue:
                await stack.complete(queue.pop())

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.process_time() - cpu, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("calls_log", type=Path)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the last repetition here")
    args = parser.parse_args()
    requests = requests_of(args.calls_log)
    proc = subprocess.Popen([sys.executable, "-c", "from r3con.testing import serve; serve(0)"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    base_url = f"http://127.0.0.1:{proc.stdout.readline().strip().split('=')[1]}/v1"
    per_call = []
    try:
        for rep in range(args.reps):
            with tempfile.TemporaryDirectory() as folder:
                if args.profile is not None and rep == args.reps - 1:
                    import cProfile
                    profiler = cProfile.Profile(time.process_time)  # CPU, not wall: a loaded machine preempts
                    cpu, wall = profiler.runcall(asyncio.run, one(base_url, requests, args.concurrency, Path(folder)))
                    profiler.dump_stats(args.profile)
                else:
                    cpu, wall = asyncio.run(one(base_url, requests, args.concurrency, Path(folder)))
            per_call.append(1000 * cpu / len(requests))
            print(f"rep {rep + 1}: {len(requests):,} calls, {per_call[-1]:.3f} ms CPU a call, wall {wall:.1f} s", flush=True)
    finally:
        proc.terminate()
        proc.wait()
    print(f"median: {statistics.median(per_call):.3f} ms CPU a call over {len(per_call)} repetitions")


if __name__ == "__main__":
    main()
