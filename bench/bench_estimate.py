"""Does the estimate hold? Actual calls, prompt and completion tokens and cost against the unsampled range and the
sampled point, over configurations of server, documents, window and rounds.

    R3CON_DATA=../shared/data .venv/bin/python bench/bench_estimate.py [--llama ../shared/llama.cpp] \
        [--only 1,4] [--sample 4] [--json]

Each configuration starts its own server: the scripted server (another process; its model priced with
a prices file at gpt-4o-mini's price, cached input at half) or, with --llama, the real llama.cpp server
with the tiny random-weight model (`tiny-random-qwen2-short.gguf`, the same prices; `--threads`, one by default), with the window a
configuration names (the scripted server's through --context-window, llama.cpp's as `-c` over its slots,
found by the estimate as `run` finds it). Then, as `r3con estimate` does: the endpoint is planned
(`plan_endpoint`), tokens are counted with its /tokenize, and `estimate_run` gives the unsampled point
and range; `run` makes the real run (no LLM cache); `sample` (N documents' real calls) and
`estimate_range` give the sampled point. Printed per configuration: each figure's actual value, whether
it falls inside the unsampled range, and the sampled point's error; then how many configurations have
all four figures inside the range and all four within 20% of the sampled point.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import DATA, TASK, corpus, start_server  # noqa: E402

FIGURES = ("calls", "prompt_tokens", "completion_tokens", "cost_usd")
PRICES = {"r3con-scripted": {"input": 0.15, "output": 0.60, "cached_input": 0.075},
          "tiny-random": {"input": 0.15, "output": 0.60, "cached_input": 0.075}}


@dataclass(frozen=True)
class Config:
    server: str  # "scripted" or "llama"
    docs: int
    size: str  # "small" (cut to 1,500 characters) or "large" (Dracula's whole, Loong's cut to 16,000)
    window: int
    rounds: int

    def label(self) -> str:
        return f"{self.server} D={self.docs} {self.size} window {self.window:,} rounds {self.rounds}"


CONFIGS = (
    Config("scripted", 6, "small", 2048, 1),
    Config("scripted", 6, "large", 32768, 2),
    Config("scripted", 46, "large", 8192, 2),
    Config("scripted", 46, "small", 4096, 1),
    Config("scripted", 100, "small", 16384, 2),
    Config("scripted", 200, "large", 32768, 2),
    Config("scripted", 200, "small", 2048, 1),
    Config("llama", 6, "large", 8192, 2),
    Config("llama", 12, "small", 2048, 1),
    Config("llama", 12, "large", 32768, 2),
    Config("llama", 24, "small", 4096, 2),
)


def texts(config: Config) -> list[tuple[str, str]]:
    if config.size == "small":
        return [(title, text[:1500]) for title, text in corpus(max(config.docs, 47), 1500)[:config.docs]]
    return corpus(config.docs, 16_000)


class Server:
    """The configuration's server, started and stopped."""

    def __init__(self, config: Config, llama: Path | None, threads: int = 1):
        self.config, self.llama, self.threads = config, llama, threads
        self.proc: subprocess.Popen[Any] | None = None
        self.base_url = ""

    def __enter__(self) -> Server:
        if self.config.server == "scripted":
            self.proc, self.base_url = start_server()
            return self
        if self.llama is None:
            raise SystemExit("llama configurations need --llama DIR")
        slots, port = 2, _free_port()
        self.proc = subprocess.Popen(
            [str(self.llama / "llama-server"), "-m", str(self.llama / "tiny-random-qwen2-short.gguf"), "--host",
             "127.0.0.1", "--port", str(port), "-c", str(self.config.window * slots), "-np", str(slots),
             "-t", str(self.threads)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        try:
            _wait_ready(self.base_url)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(base_url: str) -> None:
    import urllib.error
    import urllib.request

    for _ in range(120):
        try:
            with urllib.request.urlopen(base_url.removesuffix("/v1") + "/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise SystemExit("llama-server did not start")


async def measure(config: Config, base_url: str, prices: Path, sample_n: int) -> dict[str, Any]:
    import r3con
    from r3con.llm.transport.tokenize import make_counter
    from r3con.pipeline.estimate import estimate_range, estimate_run, plan_endpoint, sample
    from r3con.pipeline.method import run

    docs = r3con.documents_from_texts(texts(config))
    with tempfile.TemporaryDirectory() as tmp:
        settings = r3con.Settings.resolve(
            env={}, base_url=base_url, api_key="bench", out_dir=Path(tmp), cache=False, rounds=config.rounds,
            context_window=config.window if config.server == "scripted" else None, max_steps=4,
            sandbox_timeout_s=120, prices_file=prices)
        planned = await plan_endpoint(settings)
        settings = replace(settings, model=planned.model,
                           context_window=settings.context_window or planned.context_window)
        counter = make_counter(base_url=planned.base_url, model=planned.model)
        try:
            unsampled = await estimate_run(TASK, docs, settings, counter=counter)
            result = await run(TASK, docs, settings)
            assumptions, window = await sample(TASK, docs, settings, sample_n, counter=counter)
            sampled = await estimate_range(TASK, docs, replace(settings, context_window=window), assumptions,
                                           counter=counter)
        finally:
            await counter.aclose()  # type: ignore[attr-defined]
    actual = result.usage
    span = unsampled.range.to_dict() if unsampled.range is not None else {}
    point = sampled.total
    rows = {}
    for figure, got, guess in (("calls", actual.calls, point.calls),
                               ("prompt_tokens", actual.prompt_tokens, point.input_tokens),
                               ("completion_tokens", actual.completion_tokens, point.output_tokens),
                               ("cost_usd", actual.cost_usd, point.cost_usd or 0.0)):
        bounds = span.get(figure) or {}
        rows[figure] = {"actual": got, "low": bounds.get("low"), "high": bounds.get("high"),
                        "inside": bounds.get("low") is not None and bounds["low"] <= round(got, 6) <= bounds["high"],
                        "sampled": guess, "error": guess / got - 1 if got else 0.0}
    return {"config": config.label(), "parts": unsampled.parts, "window": settings.context_window,
            "counter": counter.source, "figures": rows,
            "inside": all(r["inside"] for r in rows.values()),
            "within_20": all(abs(r["error"]) <= 0.2 for r in rows.values()),
            "stages": {s.stage: _stage(s, result.by_stage.get(s.stage) or r3con.Usage()) for s in sampled.stages},
            "shares": {"run": [round(sum(1 for n in notes.values() if n) / max(1, len(notes)), 3)
                               for notes in (result.notes[0], result.notes[-1])] if result.notes else [],
                       "sampled": [round(assumptions.relevant_share, 3), round(assumptions.final_share, 3)]},
            "assumptions": list(sampled.assumptions)}


def _stage(predicted: Any, actual: Any) -> dict[str, list[int]]:
    """A stage's sampled point beside the run: calls, prompt and completion tokens."""
    return {"calls": [predicted.calls, actual.calls], "prompt": [predicted.input_tokens, actual.prompt_tokens],
            "completion": [predicted.output_tokens, actual.completion_tokens]}


def line(row: dict[str, Any]) -> str:
    cells = []
    for figure in FIGURES:
        r = row["figures"][figure]
        money = figure == "cost_usd"
        fmt = (lambda x: f"${x:.4f}") if money else (lambda x: f"{x:,.0f}")
        cells.append(f"{figure} {fmt(r['actual'])} in {fmt(r['low'])}-{fmt(r['high'])} "
                     f"{'yes' if r['inside'] else 'NO'}, sampled {r['error']:+.0%}")
    return (f"{row['config']} ({row['parts']} parts, window {row['window']:,}): " + "; ".join(cells)
            + f" | inside {'yes' if row['inside'] else 'NO'}, within 20% {'yes' if row['within_20'] else 'NO'}")


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as bench/README.md's table, and the counts: all four figures inside the unsampled range, within
    20% of the sampled point, and each figure's within 20%."""
    def cell(r: dict[str, Any], money: bool) -> str:
        fmt = (lambda x: f"{x:.4f}") if money else (lambda x: f"{x:,.0f}")
        return f"{fmt(r['actual'])} / {fmt(r['low'])}-{fmt(r['high'])} / {r['error']:+.0%}"

    out = ["| configuration | parts | calls: run / range / sampled | prompt tokens: run / range / sampled | "
           "completion tokens: run / range / sampled | USD: run / range / sampled | inside | within 20% | "
           "tokens counted by |", "|---|---:|---|---|---|---|---|---|---|"]
    for row in rows:
        cells = [cell(row["figures"][f], f == "cost_usd") for f in FIGURES]
        counted = "/tokenize" if row["counter"].endswith("/tokenize") else row["counter"]
        out.append(f"| {row['config']} | {row['parts']} | " + " | ".join(cells)
                   + f" | {'yes' if row['inside'] else 'NO'} | {'yes' if row['within_20'] else 'NO'} | {counted} |")
    per = ", ".join(f"{f} {sum(abs(r['figures'][f]['error']) <= 0.2 for r in rows)}/{len(rows)}" for f in FIGURES)
    out.append(f"\ninside {sum(r['inside'] for r in rows)}/{len(rows)}; within 20% "
               f"{sum(r['within_20'] for r in rows)}/{len(rows)}; per figure within 20%: {per}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama", type=Path, help="a folder with llama-server and tiny-random-qwen2-short.gguf")
    parser.add_argument("--only", help="configuration numbers to run (1-based, comma-separated)")
    parser.add_argument("--sample", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1,
                        help="llama-server's threads (one: on a machine shared past its cores, llama.cpp's threads "
                             "spin waiting for each other, and two generate many times slower than one)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--table", type=Path, nargs="+", metavar="FILE",
                        help="print bench/README.md's table from the rows earlier --json runs wrote, and run nothing")
    args = parser.parse_args()
    if args.table:
        print(table([json.loads(line) for path in args.table for line in path.read_text().splitlines()
                     if line.startswith("{")]))
        return
    chosen = [CONFIGS[int(i) - 1] for i in args.only.split(",")] if args.only else list(CONFIGS)
    chosen = [c for c in chosen if c.server == "scripted" or args.llama is not None]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        prices = Path(tmp) / "prices.json"
        prices.write_text(json.dumps(PRICES))
        for config in chosen:
            with Server(config, args.llama, args.threads) as server:
                row = asyncio.run(measure(config, server.base_url, prices, args.sample))
            rows.append(row)
            print(json.dumps(row) if args.json else line(row), flush=True)
    print(table(rows) if not args.json else "", f"(data: {DATA})", sep="\n")


if __name__ == "__main__":
    main()
