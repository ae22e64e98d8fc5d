"""A pool of two llama-servers, healthy and then with one wedged for good (SIGSTOP: connections accepted,
nothing answered), over Dracula's first 8 documents: both times, and whether the wedged run stays within
twice the healthy one plus a minute.

    PYTHONPATH=src .venv/bin/python bench/bench_wedged.py [--docs 8] [--stop-after 10] [--json]

Each run starts two fresh llama-servers (../shared/llama.cpp, the tiny random-weight model whose replies end
by themselves, `-c 32768 -np 4 -t 1`, ports 8350-8353) and runs `r3con run` over them (`--base-url` twice,
two relevance rounds, direct reasoning, notes and records capped at 48 tokens, the answer at 512, no cache).
In the wedged run the second server is stopped with SIGSTOP once `--stop-after` calls were answered, and
stays stopped to the end (then it is sent SIGCONT and stopped). R3CON_FIRST_BYTE_S and R3CON_PROBE_TIMEOUT_S
are left at their defaults (15 s, 5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pool import DRACULA, LLAMA, TASK, Proc  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PORTS = (8350, 8351)  # this bench's; never 8000, 8080, 11434, 30000, 1234, nor bench_pool's 8330-8339
CONCURRENCY = 8


def start(folder: Path) -> list[Proc]:
    return [Proc([str(LLAMA / "llama-server"), "-m", str(LLAMA / "tiny-random-qwen2-short.gguf"), "--host",
                  "127.0.0.1", "--port", str(port), "-c", "32768", "-np", "4", "-t", "1", "--seed", "1"],
                 port, "/health", folder / f"llama-{port}.log") for port in PORTS]


def run(docs: list[Path], folder: Path, stop_after: int | None) -> dict:
    """One `r3con run` over a fresh pool of two; `stop_after`: SIGSTOP the second once that many calls answered."""
    procs = start(folder)
    stopped: list[int] = []
    done_flag = threading.Event()

    def watch() -> None:
        while not done_flag.is_set() and not stopped:
            logs = list((folder / "runs").glob("*/calls.jsonl"))
            lines = logs[0].read_text().count("\n") if logs else 0
            if stop_after is not None and lines >= stop_after:
                os.killpg(procs[1].proc.pid, signal.SIGSTOP)
                stopped.append(lines)
            time.sleep(0.05)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    env.update(R3CON_NOTE_MAX_TOKENS="48", R3CON_POPULATE_MAX_TOKENS="48", R3CON_REASON_MAX_TOKENS="512",
               R3CON_MAX_FAILED_SHARE="1", XDG_CACHE_HOME=str(folder / "xdg"), PYTHONPATH=str(ROOT / "src"),
               R3CON_LOCAL_PORTS="")
    args = [sys.executable, "-m", "r3con", "run", TASK, *map(str, docs), "--out", str(folder / "runs"), "--no-cache",
            "--reasoning", "direct", "--json", "--concurrency", str(CONCURRENCY),
            *(a for p in procs for a in ("--base-url", f"http://127.0.0.1:{p.port}/v1"))]
    watcher = threading.Thread(target=watch, daemon=True)
    started = time.perf_counter()
    watcher.start()
    try:
        done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=1800)
    finally:
        elapsed = time.perf_counter() - started
        done_flag.set()
        watcher.join()
        for proc in procs:
            if proc.proc.poll() is None:
                os.killpg(proc.proc.pid, signal.SIGCONT)
            proc.stop()
    usage_files = list((folder / "runs").glob("*/usage.json"))
    usage = json.loads(usage_files[0].read_text()) if usage_files else {}
    manifests = list((folder / "runs").glob("*/manifest.json"))
    degraded = json.loads(manifests[0].read_text()).get("inputs", {}).get("degraded", []) if manifests else []
    waits = [line for line in done.stderr.splitlines() if "waiting" in line or "wait" in line]
    return {"exit": done.returncode, "seconds": round(elapsed, 1), "stopped_after_calls": stopped[0] if stopped else None,
            "calls": usage.get("calls"), "events": usage.get("events", {}),
            "by_endpoint": [{k: e.get(k) for k in ("base_url", "calls", "errors", "taken_out", "out")}
                            for e in usage.get("by_endpoint", [])],
            "degraded": len(degraded), "stderr_tail": done.stderr.strip().splitlines()[-3:], "wait_lines": waits[:5]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=8)
    parser.add_argument("--stop-after", type=int, default=10, help="answered calls before the second is stopped")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    docs = sorted(DRACULA.glob("*.txt"))[: args.docs]
    with tempfile.TemporaryDirectory(prefix="r3con-bench-wedged-") as tmp:
        (Path(tmp) / "healthy").mkdir()
        (Path(tmp) / "wedged").mkdir()
        healthy = run(docs, Path(tmp) / "healthy", None)
        wedged = run(docs, Path(tmp) / "wedged", args.stop_after)
    target = 2 * healthy["seconds"] + 60
    result = {"documents": len(docs), "healthy": healthy, "wedged": wedged, "target_s": round(target, 1),
              "within_target": wedged["seconds"] <= target and wedged["exit"] == 0}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"Dracula, first {len(docs)} documents; pool of two llama-servers; --concurrency {CONCURRENCY}")
    print(f"healthy: {healthy['seconds']:.1f} s (exit {healthy['exit']}, {healthy['calls']} calls)")
    print(f"one wedged (SIGSTOP after {wedged['stopped_after_calls']} calls): {wedged['seconds']:.1f} s "
          f"(exit {wedged['exit']}, {wedged['calls']} calls, events {wedged['events']}, degraded {wedged['degraded']})")
    print(f"target: wedged <= 2 x healthy + 60 s = {target:.1f} s: {'met' if result['within_target'] else 'NOT met'}")


if __name__ == "__main__":
    main()
