"""How reading, splitting and estimating scale with one large text file, and how fast Ctrl-C ends that work.

    .venv/bin/python bench/bench_large_file.py [--sizes-mb 20,50,100,200] [--repeat 3] [--no-interrupt] [--json]

For each size it writes one plain-text file of English-like paragraphs (with some accented words, so
the text is not pure ASCII) and times, in a fresh process each, `r3con estimate` on it (reading,
decoding, splitting at the default 32,768-token window, rendering and counting every part): median
and max wall seconds over `--repeat` runs, the seconds per MB, and the ratio to the smallest size
(linear work keeps seconds per MB flat); CPU seconds (user + system) are the child's, steadier than
wall time on a shared machine. Peak RSS is the child's high-water mark, also as a multiple
of the file size. Then, unless --no-interrupt, it starts the same estimate on the largest file,
sends SIGINT 0 to 2 s after the process has read the file (seen in /proc/PID/io: decoding, hashing,
splitting and counting follow), one run each, and times how long the process takes to exit after the
signal, with its exit code (130 expected) and its last line (no traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("the letter was sent from Oslo to Bergen in the spring of that year and the clerk wrote down "
         "every name he heard Müller Café naïve Zoë résumé witness harbour council records ledger").split()


def make_file(path: Path, megabytes: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    paragraphs = []
    for _ in range(400):  # a pool of paragraphs, repeated to size: generating is not what is measured
        sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 25))).capitalize() + "."
                     for _ in range(rng.randint(2, 8))]
        paragraphs.append(" ".join(sentences))
    block = "\n\n".join(paragraphs).encode("utf-8") + b"\n\n"
    target = megabytes * 1_000_000
    with path.open("wb") as f:
        written = 0
        while written < target:
            chunk = block[: target - written]
            f.write(chunk)
            written += len(chunk)


def estimate_cmd(path: Path) -> list[str]:
    return [sys.executable, "-m", "r3con", "estimate", "How many letters were sent?", str(path), "--json"]


def timed(path: Path) -> tuple[float, float, int, float]:
    """(wall seconds, peak RSS in MB, exit code, CPU seconds) of one estimate in a fresh process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    started = time.perf_counter()
    proc = subprocess.Popen(estimate_cmd(path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, rusage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, rusage.ru_maxrss / 1024, proc.returncode, rusage.ru_utime + rusage.ru_stime


def _read_so_far(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def interrupt(path: Path, after_s: float) -> tuple[float, int | None, str]:
    """(seconds from SIGINT to exit, exit code, last stderr line) of an estimate interrupted `after_s` after it
    finished reading the file (from /proc/PID/io; then it decodes, hashes, splits and counts)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    proc = subprocess.Popen(estimate_cmd(path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    size = path.stat().st_size
    while _read_so_far(proc.pid) < size and proc.poll() is None:
        time.sleep(0.005)
    time.sleep(after_s)
    if proc.poll() is not None:
        return 0.0, proc.returncode, "finished before the signal"
    sent = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        return time.perf_counter() - sent, None, "did not exit within 30 s"
    lines = [line for line in err.splitlines() if line.strip()]
    return time.perf_counter() - sent, proc.returncode, (lines[-1] if lines else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="20,50,100,200")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-interrupt", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes_mb.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mb in sizes:
            path = Path(tmp) / f"big-{mb}mb.txt"
            make_file(path, mb)
            runs = [timed(path) for _ in range(args.repeat)]
            walls = [w for w, _, _, _ in runs]
            if any(code != 0 for _, _, code, _ in runs):
                print(f"warning: estimate on {mb} MB exited {[c for _, _, c, _ in runs]}", file=sys.stderr)
            rss = max(r for _, r, _, _ in runs)
            rows.append({"mb": mb, "median_s": statistics.median(walls), "max_s": max(walls),
                         "cpu_s": statistics.median(c for _, _, _, c in runs),
                         "s_per_mb": statistics.median(walls) / mb, "peak_rss_mb": rss, "rss_per_file": rss / mb})
            path.unlink()
        stops = []
        if not args.no_interrupt:
            path = Path(tmp) / f"big-{sizes[-1]}mb.txt"
            make_file(path, sizes[-1])
            for after in (0.0, 0.25, 0.5, 1.0, 1.5, 2.0):
                took, code, line = interrupt(path, after)
                stops.append({"after_s": after, "exit_s": took, "code": code, "line": line})
    base = rows[0]["s_per_mb"]
    for row in rows:
        row["ratio_s_per_mb"] = row["s_per_mb"] / base
    if args.json:
        print(json.dumps({"sizes": rows, "interrupts": stops}))
        return
    print(f"{'MB':>5} {'median s':>9} {'max s':>7} {'CPU s':>6} {'s/MB':>7} {'ratio':>6} {'peak RSS MB':>12} "
          f"{'RSS/file':>9}")
    for r in rows:
        print(f"{r['mb']:>5} {r['median_s']:>9.2f} {r['max_s']:>7.2f} {r['cpu_s']:>6.2f} {r['s_per_mb']:>7.3f} "
              f"{r['ratio_s_per_mb']:>6.2f} {r['peak_rss_mb']:>12.0f} {r['rss_per_file']:>9.1f}")
    for s in stops:
        print(f"SIGINT {s['after_s']:.2f} s after the file was read: exited {s['exit_s']:.2f} s later, "
              f"code {s['code']}: {s['line']}")


if __name__ == "__main__":
    main()
