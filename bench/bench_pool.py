"""What document affinity saves across replicas: the share of prompt tokens the engines served from their
prefix caches, for one llama-server, three behind r3con's client-side pool, three behind each router with
its affinity policy and r3con's routing key, and three behind a round-robin router; and a failover run.

    .venv/bin/python bench/bench_pool.py [--docs 46] [--configs one,pool,vllm-hash,sglang-manual,vllm-rr]
                                         [--failover] [--repeats 1] [--json]

Every configuration starts fresh llama-server processes (../shared/llama.cpp, the tiny random-weight model
whose replies end by themselves, `-c 32768 -np 4 -t 1`, ports 8330-8339), so no cache carries over, and
runs `r3con run` over the first `--docs` documents of Dracula (../shared/data/dracula) with two relevance
rounds, direct reasoning, notes and records capped at 48 tokens (the answer at 512). The share is usage.json's cached_tokens over
prompt_tokens (what llama.cpp reports in `usage.prompt_tokens_details.cached_tokens`). The routers come
from PyPI (`vllm-router`, `sglang-router`), found in $R3CON_ROUTER_BIN, .venv-routers/bin or on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("R3CON_SHARED", ROOT.parent / "shared"))
LLAMA = SHARED / "llama.cpp"
DRACULA = SHARED / "data" / "dracula" / "docs"
PORTS = iter(range(8330, 8340))  # this bench's ports; never 8000, 8080, 11434, 30000, 1234
TASK = "On the voyage to England and during his stay there, how many people did Dracula kill, and who were they?"
CONCURRENCY = 8  # per server: the pool sends 8 to each, a router gets 8 per worker behind it

CONFIGS = {  # name: (servers, router binary and policy or None, what it is)
    "one": (1, None, "(a) one llama-server"),
    "pool": (3, None, "(b) three, r3con's client-side pool (--base-url x3)"),
    "vllm-hash": (3, ("vllm-router", "consistent_hash"), "(c) three behind vllm-router consistent_hash + r3con's key"),
    "sglang-manual": (3, ("sglang-router", "manual"), "(c) three behind sglang-router manual + r3con's key"),
    "vllm-cache": (3, ("vllm-router", "cache_aware"), "(c') three behind vllm-router cache_aware (prefix trees)"),
    "vllm-rr": (3, ("vllm-router", "round_robin"), "(d) three behind vllm-router round_robin"),
}


def router_binary(name: str) -> Path | None:
    for folder in (os.environ.get("R3CON_ROUTER_BIN"), ROOT / ".venv-routers" / "bin", Path(sys.executable).parent):
        if folder and (Path(folder) / name).is_file():
            return Path(folder) / name
    found = shutil.which(name)
    return Path(found) if found else None


class Proc:
    """A server in its own session (its children stop with it), ready when `ready` answers 200."""

    def __init__(self, args: list[str], port: int, ready: str, log: Path):
        self.port = port
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"{args[0]} exited: {log.read_text(errors='replace')[-1500:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{ready}", timeout=2) as reply:
                    if reply.status == 200 and (ready != "/workers" or len(json.loads(reply.read())["workers"]) >= 3):
                        return
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.2)
        self.stop()
        raise SystemExit(f"{args[0]} was not ready in 90 s")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def servers(n: int, router: tuple[str, str] | None, folder: Path) -> Iterator[tuple[list[str], list[Proc]]]:
    """Fresh llama-servers (and a router in front): the base URLs to give r3con, and the servers."""
    global PORTS
    PORTS = iter(range(8330, 8340))
    started: list[Proc] = []
    try:
        for i in range(n):
            port = next(PORTS)
            started.append(Proc([str(LLAMA / "llama-server"), "-m", str(LLAMA / "tiny-random-qwen2-short.gguf"),
                                 "--host", "127.0.0.1", "--port", str(port), "-c", "32768", "-np", "4", "-t", "1",
                                 "--seed", "1"], port, "/health", folder / f"llama-{i}.log"))
        urls = [f"http://127.0.0.1:{s.port}/v1" for s in started]
        if router is not None:
            name, policy = router
            binary = router_binary(name)
            if binary is None:
                raise LookupError(f"{name} is not installed (pip install {name})")
            port, metrics = next(PORTS), next(PORTS)
            args = [*([str(binary), "launch"] if name == "sglang-router" else [str(binary)]),
                    "--host", "127.0.0.1", "--port", str(port), "--policy", policy,
                    "--worker-urls", *[f"http://127.0.0.1:{s.port}" for s in started],
                    "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics)]
            started.append(Proc(args, port, "/workers", folder / f"{name}.log"))
            urls = [f"http://127.0.0.1:{port}/v1"]
        yield urls, started[:n]
    finally:
        for proc in reversed(started):
            proc.stop()


def r3con_run(urls: list[str], docs: list[Path], folder: Path, concurrency: int,
              watch: threading.Thread | None = None) -> tuple[int, dict, float]:
    """`r3con run` (exit code, usage.json, seconds)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    env.update(R3CON_NOTE_MAX_TOKENS="48", R3CON_POPULATE_MAX_TOKENS="48", R3CON_REASON_MAX_TOKENS="512",
               R3CON_MAX_FAILED_SHARE="1", XDG_CACHE_HOME=str(folder / "xdg"))
    args = [str(Path(sys.executable).parent / "r3con"), "run", TASK, *map(str, docs), "--out", str(folder / "runs"),
            "--no-cache", "--reasoning", "direct", "--quiet", "--json", "--concurrency", str(concurrency),
            *(a for u in urls for a in ("--base-url", u))]
    started = time.perf_counter()
    if watch is not None:
        watch.start()
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=3600)
    elapsed = time.perf_counter() - started
    runs = sorted((folder / "runs").glob("*/usage.json"), key=lambda p: p.stat().st_mtime)
    usage = json.loads(runs[-1].read_text()) if runs else {}
    if done.returncode != 0:
        print(f"  r3con exited {done.returncode}: {done.stderr.strip()[-400:]}", file=sys.stderr)
    return done.returncode, usage, elapsed


def share(usage: dict) -> float:
    return usage.get("cached_tokens", 0) / max(1, usage.get("prompt_tokens", 0))


def failover(docs: list[Path], folder: Path, kill_after: int) -> dict:
    """A pool of three where one server is SIGKILLed once `kill_after` calls were answered."""
    with servers(3, None, folder) as (urls, procs):
        victim = procs[1]
        killed: list[int] = []

        def watch() -> None:
            deadline = time.monotonic() + 1800
            while time.monotonic() < deadline and not killed:
                logs = list((folder / "runs").glob("*/calls.jsonl"))
                lines = logs[0].read_text().count("\n") if logs else 0
                if lines >= kill_after:
                    victim.kill()
                    killed.append(lines)
                time.sleep(0.05)

        code, usage, elapsed = r3con_run(urls, docs, folder, CONCURRENCY, threading.Thread(target=watch, daemon=True))
    runs = sorted((folder / "runs").glob("*/manifest.json"), key=lambda p: p.stat().st_mtime)
    manifest = json.loads(runs[-1].read_text())
    calls = [json.loads(line) for line in (runs[-1].parent / "calls.jsonl").read_text().splitlines()]
    dead = next(e for e in usage["by_endpoint"] if e["base_url"] == f"http://127.0.0.1:{victim.port}/v1")
    parts = sum(d["parts"] for d in manifest["documents"])
    read = len({(c["doc"], c["part"]) for c in calls if c["stage"] == "relevance" and c["round"] == 1})
    transport = [d for d in manifest["inputs"].get("degraded", [])
                 if any(w in d.get("cause", "") for w in ("connect", "pool", "timed out"))]
    return {"exit": code, "killed_after_calls": killed[0] if killed else None, "seconds": round(elapsed, 1),
            "documents": len(docs), "parts": parts, "parts_read_in_round_1": read, "degraded_by_transport": len(transport),
            "degraded_by_noise": len(manifest["inputs"].get("degraded", [])) - len(transport),
            "failed_at_dead_endpoint": dead["errors"], "failovers": usage["events"].get("failovers", 0),
            "dead_taken_out": dead["taken_out"],
            "answered_calls_sent_twice": _twice(calls)}


def _twice(calls: list[dict]) -> int:
    answered = [c["request_hash"] for c in calls if "error" not in c]
    return len(answered) - len(set(answered))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=46)
    parser.add_argument("--configs", default="one,pool,vllm-hash,sglang-manual,vllm-cache,vllm-rr")
    parser.add_argument("--failover", action="store_true")
    parser.add_argument("--kill-after", type=int, default=20, help="answered calls before the failover run's kill")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    docs = sorted(DRACULA.glob("*.txt"))[: args.docs]
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="r3con-bench-pool-") as tmp:
        for name in [c for c in args.configs.split(",") if c]:
            n, router, label = CONFIGS[name]
            shares, seconds, usage = [], [], {}
            try:
                for r in range(args.repeats):
                    folder = Path(tmp) / f"{name}-{r}"
                    folder.mkdir()
                    with servers(n, router, folder) as (urls, _):
                        code, usage, elapsed = r3con_run(urls, docs, folder, CONCURRENCY * (n if router else 1))
                    shares.append(share(usage))
                    seconds.append(elapsed)
            except LookupError as exc:
                results[name] = {"label": label, "skipped": str(exc)}
                print(f"{label}: skipped ({exc})", file=sys.stderr)
                continue
            results[name] = {"label": label, "cached_share": statistics.median(shares), "seconds": statistics.median(seconds),
                             "calls": usage.get("calls"), "prompt_tokens": usage.get("prompt_tokens"),
                             "cached_tokens": usage.get("cached_tokens"),
                             "by_endpoint": [{k: e[k] for k in ("calls", "documents", "prompt_tokens", "cached_tokens")}
                                             for e in usage.get("by_endpoint", [])]}
            print(f"{label}: {100 * results[name]['cached_share']:.1f}% of prompt tokens from cache "
                  f"({results[name]['seconds']:.0f} s)", file=sys.stderr)
        if args.failover:
            folder = Path(tmp) / "failover"
            folder.mkdir()
            results["failover"] = failover(docs, folder, args.kill_after)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    base = results.get("one", {}).get("cached_share")
    print(f"Dracula, first {len(docs)} documents; two relevance rounds; --concurrency {CONCURRENCY} per server")
    print(f"{'configuration':<62} {'cached':>8} {'vs (a)':>8} {'calls':>6} {'s':>6}")
    for name, r in results.items():
        if name == "failover":
            continue
        if "skipped" in r:
            print(f"{r['label']:<62} skipped: {r['skipped']}")
            continue
        delta = f"{100 * (r['cached_share'] - base):+.1f}" if base is not None else "-"
        print(f"{r['label']:<62} {100 * r['cached_share']:>7.1f}% {delta:>8} {r['calls']:>6} {r['seconds']:>6.0f}")
    if "failover" in results:
        print("failover:", json.dumps(results["failover"]))


if __name__ == "__main__":
    main()
