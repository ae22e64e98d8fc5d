"""What the sandbox's isolation costs: worker start, a trivial cell's round trip, a pandas groupby.

    .venv/bin/python bench/bench_sandbox.py [--starts 15] [--cells 200] [--groupbys 30] [--json]

Each measurement runs in two configurations, taking turns: with every isolation layer the kernel allows ("full") and with every
optional layer skipped ("bare": still a separate worker process with a clean environment and a
scratch dir, but no rlimits, namespaces, read-only root or uid drop). The groupby is also timed in
this process with no sandbox at all. Prints medians and 90th percentiles in milliseconds, and the
full/bare ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

from r3con.sandbox import Sandbox, SandboxLimits
from r3con.sandbox._results import OPTIONAL_LAYERS

RECORDS = 100_000
GROUPBY = "out = orders.groupby('supplier').agg(qty=('qty', 'sum'), n=('qty', 'size'))\nlen(out)"
LIMITS = SandboxLimits(timeout_s=120, memory_mb=4096, cpu_s=3600)


def records(n: int) -> list[dict[str, Any]]:
    return [{"supplier": f"s{i % 97}", "qty": i % 13, "price": (i * 7) % 101 / 10} for i in range(n)]


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return {"median_ms": statistics.median(ordered) * 1000, "p90_ms": p90 * 1000, "runs": len(ordered)}


async def interleaved(times: int, actions: dict[str, Callable[[], Awaitable[object]]]) -> dict[str, list[float]]:
    """Time each action `times` times, taking turns, so that a change in the machine's load hits all alike."""
    samples: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(times):
        for name, action in actions.items():
            started = time.perf_counter()
            await action()
            samples[name].append(time.perf_counter() - started)
    return samples


def starter(skip: Collection[str], scratch: Path) -> Callable[[], Awaitable[None]]:
    async def start_and_close() -> None:
        box = Sandbox(limits=LIMITS, scratch_root=scratch, skip_layers=skip)
        await box.start()
        await box.close()

    return start_and_close


def runner(box: Sandbox, code: str, expected: str | None) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        result = await box.run(code)
        if result.error or (expected is not None and result.stdout != expected):
            raise RuntimeError(result.error or result.stdout)

    return run


async def measure(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    kinds: dict[str, Collection[str]] = {"full": (), "bare": sorted(OPTIONAL_LAYERS)}
    starts = await interleaved(args.starts, {kind: starter(skip, scratch) for kind, skip in kinds.items()})
    data = records(RECORDS)
    report: dict[str, Any] = {kind: {"start": summary(starts[kind])} for kind in kinds}
    boxes = {}
    for kind, skip in kinds.items():
        started = time.perf_counter()
        boxes[kind] = Sandbox(dataframes={"orders": data}, limits=LIMITS, scratch_root=scratch, skip_layers=skip)
        await boxes[kind].start()
        report[kind]["start_with_100k_records_ms"] = (time.perf_counter() - started) * 1000
        report[kind]["layers_on"] = [name for name, state in boxes[kind].isolation.layers.items() if state == "on"]
    try:
        for box in boxes.values():  # warm: pandas' first groupby imports and compiles more
            await runner(box, GROUPBY, "97\n")()
        cells = await interleaved(args.cells, {kind: runner(box, "x = 1", "") for kind, box in boxes.items()})
        groups = await interleaved(args.groupbys, {kind: runner(box, GROUPBY, "97\n") for kind, box in boxes.items()})
    finally:
        for box in boxes.values():
            await box.close()
    for kind in kinds:
        report[kind]["trivial_cell"] = summary(cells[kind])
        report[kind]["groupby_100k"] = summary(groups[kind])
    return report


def in_process_groupby(times: int) -> dict[str, float]:
    import pandas as pd

    frame = pd.DataFrame(records(RECORDS))
    frame.groupby("supplier").agg(qty=("qty", "sum"), n=("qty", "size"))
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        frame.groupby("supplier").agg(qty=("qty", "sum"), n=("qty", "size"))
        samples.append(time.perf_counter() - started)
    return summary(samples)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        report = await measure(args, Path(tmp))
    full, bare = report["full"], report["bare"]
    ratios = {
        key: full[key]["median_ms"] / bare[key]["median_ms"] for key in ("start", "trivial_cell", "groupby_100k")
    }
    return {"full": full, "bare": bare, "in_process_groupby_100k": in_process_groupby(args.groupbys),
            "ratio_full_over_bare": ratios}


def show(report: dict[str, Any]) -> None:
    print(f"{'':28}{'full median':>12}{'p90':>9}{'bare median':>13}{'p90':>9}{'full/bare':>11}")
    for key, label in (("start", "worker start (no data)"), ("trivial_cell", "trivial cell round trip"),
                       ("groupby_100k", "groupby over 100k records")):
        full, bare = report["full"][key], report["bare"][key]
        print(f"{label:28}{full['median_ms']:>10.2f}ms{full['p90_ms']:>7.2f}ms{bare['median_ms']:>11.2f}ms"
              f"{bare['p90_ms']:>7.2f}ms{report['ratio_full_over_bare'][key]:>10.2f}x")
    print(f"{'start with 100k records':28}{report['full']['start_with_100k_records_ms']:>10.0f}ms"
          f"{'':9}{report['bare']['start_with_100k_records_ms']:>11.0f}ms")
    local = report["in_process_groupby_100k"]
    print(f"{'groupby, in process':28}{local['median_ms']:>10.2f}ms{local['p90_ms']:>7.2f}ms")
    print(f"layers on (full): {', '.join(report['full']['layers_on'])}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=15)
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--groupbys", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    arguments = parser.parse_args()
    result = asyncio.run(main(arguments))
    if arguments.json:
        json.dump(result, sys.stdout, indent=1)
        print()
    else:
        show(result)
