"""The corpus store and a run at scale: D = 1,000 to 100,000 documents of about 3,000 characters.

    .venv/bin/python bench/bench_store.py [--sizes 1000,10000] [--chars 3000] [--budget 4000]
                                          [--kill-at 0.5] [--work DIR] [--json]

Per D, a corpus of D distinct windows of `--chars` characters of Loong's texts (papers and financial
reports, some in Chinese; the window start moves by the largest stride that still gives D windows,
taken round-robin over the files) is written as D files under `--work`, then `r3con run` (the CLI, in
its own process, against the scripted server in another; LLM cache and corpus store in `--work`; its
modules' bytecode kept, as pip installs r3con, whatever PYTHONDONTWRITEBYTECODE says here):

1. question A on a store that has never seen the corpus, two rounds with a notes budget, schema,
   population and answer; SIGKILLed once the server has answered `--kill-at` of the calls a run
   makes (3 per document), then `r3con run --resume`. Measured: wall time, calls, peak RSS (the
   larger of the two attempts, from wait4), harness CPU per call (both attempts' CPU, imports and
   the sandbox included, over the calls the server answered; the server is another process; and per
   attempt, its CPU over the calls it logged, those the resume served from the LLM cache included), prompt
   tokens per document, the run folder's size per document, and the calls the first attempt had
   logged as answered that the resume sent again (`repeated_successful_calls`, 0: they come from
   the LLM cache). `lost_in_flight` counts the calls the server answered while the process was being
   killed, before it could record them: those are asked again, as any in-flight call must be;
2. question B over the same folder: the seconds from starting `r3con run` to the server receiving
   its first chat request; the same from when Python is up and r3con imported (the corpus read
   from the store, nothing parsed, split or counted again), and that without the store
   (`--no-corpus-store`: every file read and split afresh). Each is stopped once its first request
   has arrived.

Prints one row per D and, for D = 10,000 and 100,000, the targets (PASS/FAIL).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("R3CON_DATA") or ROOT.parent / "shared" / "data")
QUESTION_A = "Which companies or studies report a growth in revenue, by how much, and in which year?"
QUESTION_B = "Which documents describe a method evaluated on a benchmark, and what score did it reach?"
LATENCY = {"per_call_ms": 5.0, "per_prompt_token_ms": 0.0002, "per_cached_token_ms": 0.00002,
           "per_completion_token_ms": 0.005}
SERVER = """
from pathlib import Path
from r3con.testing import Behaviour, LatencyModel, serve
serve(0, max_model_len=100_000_000, log_path=Path({log!r}),
      behaviour=Behaviour(latency=LatencyModel(**{latency}), cache_blocks=200_000))
"""


def windows(size: int, chars: int) -> list[tuple[str, str]]:
    """`size` distinct (name, text) windows of `chars` characters of Loong's texts, round-robin over files."""
    paths = sorted((DATA / "loong" / "doc" / "paper").glob("*")) + sorted((DATA / "loong" / "doc" / "financial").glob("*"))
    texts = [(p.stem[:40], p.read_text(encoding="utf-8", errors="replace")) for p in paths]
    texts = [(n, t) for n, t in texts if len(t) >= chars]

    def count(stride: int) -> int:
        return sum((len(t) - chars) // stride + 1 for _, t in texts)

    stride = chars
    while stride > 1 and count(stride) < size:
        stride = max(1, stride * 3 // 4)
    if count(stride) < size:
        raise SystemExit(f"Loong's texts hold fewer than {size} windows of {chars} characters")
    out: list[tuple[str, str]] = []
    offset = 0
    while len(out) < size:
        for name, text in texts:
            if offset + chars <= len(text) and len(out) < size:
                out.append((f"{name}@{offset}", text[offset:offset + chars]))
        offset += stride
    return out


def build(folder: Path, size: int, chars: int) -> None:
    """Write the corpus as `size` files in folders of 1,000 (once; kept between runs of the script)."""
    done = folder / ".complete"
    if done.exists():
        return
    shutil.rmtree(folder, ignore_errors=True)
    for i, (name, text) in enumerate(windows(size, chars)):
        sub = folder / f"{i // 1000:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{i:06d}.txt").write_text(f"{name}\n\n{text}", encoding="utf-8")
    done.write_text("")


def start_server(log: Path) -> tuple[subprocess.Popen[str], str]:
    code = SERVER.format(latency=LATENCY, log=str(log))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("PORT="):
        proc.kill()
        raise SystemExit(f"the scripted server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{line.split('=', 1)[1]}/v1"


def served(log: Path) -> list[dict[str, Any]]:
    """The server's records of chat requests so far."""
    if not log.exists():
        return []
    out = []
    with log.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:  # a line being written
                continue
            if record.get("path", "").endswith("/chat/completions"):
                out.append(record)
    return out


class Answered:
    """Chat requests the server answered so far, counted from where the last count stopped: polled every
    half second, a scan of the whole log (tens of megabytes at D = 100,000) took a core from the run."""

    def __init__(self, log: Path):
        self.log, self.offset, self.count = log, 0, 0

    def __call__(self) -> int:
        if not self.log.exists():
            return self.count
        with self.log.open("rb") as f:
            f.seek(self.offset)
            for line in f:
                if not line.endswith(b"\n"):  # a line being written: counted next time
                    break
                self.offset += len(line)
                self.count += b"/chat/completions" in line and b'"status": 200' in line
        return self.count



def command(question: str, corpus: Path, work: Path, base_url: str, budget: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "r3con", "run", question, str(corpus), "--base-url", base_url, "--api-key", "bench",
            "--rounds", "2", "--notes-budget", str(budget), "--context-window", "32768", "--concurrency", "16",
            "--max-steps", "4", "--out", str(work / "runs"), "--cache", str(work / "llm.sqlite"),
            "--corpus-dir", str(work / "corpus"), "--quiet", "--json", *extra]


def installed_env() -> dict[str, str]:
    """The environment r3con runs in here: as pip installs it, with its modules' bytecode kept (a
    PYTHONDONTWRITEBYTECODE in the caller's environment would compile every module at every start)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONUNBUFFERED": "1"}


def attempt(cmd: list[str], log: Path, kill_after: int | None) -> dict[str, Any]:
    """Run `cmd`; SIGKILL it once the server answered `kill_after` chat requests. Wall, CPU, peak RSS, output."""
    out = tempfile.TemporaryFile()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=installed_env())
    killed = False
    count = Answered(log)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if kill_after is not None and not killed and count() >= kill_after:
            proc.send_signal(signal.SIGKILL)
            killed = True
        time.sleep(0.5)
    out.seek(0)
    text = out.read().decode("utf-8", "replace")
    return {"wall_s": time.perf_counter() - started, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024, "killed": killed, "status": os.waitstatus_to_exitcode(status),
            "output": text}


IMPORTED = """
import sys, time
from r3con.cli import main
sys.argv = ["r3con", *sys.argv[1:]]
print(time.time(), flush=True)
main()
"""


def cpu_seconds(pid: int) -> float:
    """The CPU time a running process has used (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_call(cmd: list[str], log: Path, *, imported: bool = False) -> tuple[float, float]:
    """Seconds from starting `cmd` (`imported`: from when Python is up and r3con imported) to the server's first
    chat request of it, and the CPU seconds the command had used by then (all of it, imports included; within
    the 50 ms this polls at); the command is then stopped."""
    before = len(served(log))
    started = time.time()
    if imported:
        proc = subprocess.Popen([sys.executable, "-c", IMPORTED, *cmd[3:]], stdout=subprocess.PIPE, env=installed_env(),
                                stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        started = float(proc.stdout.readline())
    else:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, env=installed_env())
    try:
        while True:
            records = served(log)[before:]
            chats = [r for r in records if r.get("stage") == "relevance"]
            if chats:
                return min(r["time"] for r in chats) - started, cpu_seconds(proc.pid)
            if proc.poll() is not None:
                raise SystemExit(f"the second question ended (exit {proc.returncode}) before any call")
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def repeated_calls(calls: Path, first_lines: int) -> int:
    """Calls the first attempt logged as answered (its first `first_lines` lines of calls.jsonl) that a later
    attempt sent to the endpoint again (not from the LLM cache)."""
    done: set[str] = set()
    again = 0
    with calls.open(encoding="utf-8") as lines:
        for n, line in enumerate(lines):
            record = json.loads(line)
            if "error" in record or record.get("from_cache") or "request_hash" not in record:
                continue
            if n < first_lines:
                done.add(record["request_hash"])
            elif record["request_hash"] in done:
                again += 1
    return again


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def one(size: int, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work) / f"D{size}"
    corpus = Path(args.work) / f"corpus-{size}-{args.chars}"
    build(corpus, size, args.chars)
    shutil.rmtree(work, ignore_errors=True)  # a fresh run: no LLM cache, no earlier run to reuse, an empty store
    work.mkdir(parents=True)
    log = work / "server.jsonl"
    server, base_url = start_server(log)
    try:
        cmd = command(QUESTION_A, corpus, work, base_url, args.budget)
        kill_after = int(3 * size * args.kill_at) if args.kill_at else None
        first = attempt(cmd, log, kill_after)
        runs = sorted((work / "runs").iterdir())
        if len(runs) != 1:
            raise SystemExit(f"expected one run folder, found {len(runs)}: {first['output'][-2000:]}")
        run_dir = runs[0]
        attempts = [first]
        logged = (run_dir / "calls.jsonl").read_text(encoding="utf-8").count("\n")
        if first["killed"]:
            resume = [sys.executable, "-m", "r3con", "run", "--resume", str(run_dir), "--base-url", base_url,
                      "--api-key", "bench", "--cache", str(work / "llm.sqlite"), "--corpus-dir", str(work / "corpus"),
                      "--quiet", "--json"]
            attempts.append(attempt(resume, log, None))
        last = attempts[-1]
        if last["status"] != 0:
            raise SystemExit(f"the run failed (exit {last['status']}): {last['output'][-3000:]}")
        summary = json.loads(last["output"].strip().splitlines()[-1])
        records = served(log)
        ok = [r["request_hash"] for r in records if r.get("status") == 200]
        answered_twice = len(ok) - len(set(ok))
        repeated = repeated_calls(run_dir / "calls.jsonl", logged)
        made = [logged, (run_dir / "calls.jsonl").read_text(encoding="utf-8").count("\n") - logged][:len(attempts)]
        second, second_cpu = first_call(command(QUESTION_B, corpus, work, base_url, args.budget), log)
        second_imported, _ = first_call(command(QUESTION_B, corpus, work, base_url, args.budget), log, imported=True)
        second_off, off_cpu = first_call(command(QUESTION_B, corpus, work, base_url, args.budget, "--no-corpus-store"),
                                         log, imported=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    calls = len(ok)
    usage = summary["usage"]
    folder = folder_bytes(run_dir)
    sizes = sorted(((p.stat().st_size, p.name) for p in run_dir.rglob("*") if p.is_file()), reverse=True)[:5]
    return {
        "D": size, "documents": summary["documents"], "calls": calls,
        "wall_s": round(sum(a["wall_s"] for a in attempts), 1),
        "killed_at_calls": kill_after if first["killed"] else None, "repeated_successful_calls": repeated,
        "lost_in_flight": answered_twice - repeated,
        "peak_rss_mib": round(max(a["peak_rss_mib"] for a in attempts), 1),
        "peak_rss_mib_by_attempt": [round(a["peak_rss_mib"], 1) for a in attempts],
        "calls_handled_by_attempt": made,
        "cpu_ms_per_call": round(1000 * sum(a["cpu_s"] for a in attempts) / max(1, calls), 3),
        "cpu_ms_per_call_by_attempt": [round(1000 * a["cpu_s"] / max(1, n), 3) for a, n in zip(attempts, made, strict=True)],
        "prompt_tokens": usage["prompt_tokens"], "prompt_tokens_per_doc": round(usage["prompt_tokens"] / size, 1),
        "run_folder_kib_per_doc": round(folder / 1024 / size, 2),
        "largest_files": [f"{name} {n / 1024:.0f} KiB" for n, name in sizes],
        "second_question_first_call_s": round(second, 3),
        "second_question_first_call_after_import_s": round(second_imported, 3),
        "second_question_cpu_s_to_first_call": round(second_cpu, 2),
        "no_store_first_call_after_import_s": round(second_off, 3),
        "no_store_cpu_s_to_first_call": round(off_cpu, 2),
        "corpus_store": summary.get("corpus_store"),
        "degraded": len(summary.get("degraded") or []),
    }


def first_calls(size: int, args: argparse.Namespace) -> dict[str, Any]:
    """The second question's first call (with the store, and without) over the corpus and store of an earlier run."""
    work = Path(args.work) / f"D{size}"
    corpus = Path(args.work) / f"corpus-{size}-{args.chars}"
    if not (work / "corpus").is_dir():
        raise SystemExit(f"no corpus store in {work}: run this script for D = {size} first")
    log = work / "first-calls.jsonl"
    log.unlink(missing_ok=True)
    server, base_url = start_server(log)
    try:
        row: dict[str, Any] = {"D": size}
        for name, extra, imported in (("from_start", (), False), ("after_import", (), True),
                                      ("no_store_after_import", ("--no-corpus-store",), True)):
            wall, cpu = first_call(command(QUESTION_B, corpus, work, base_url, args.budget, *extra), log, imported=imported)
            row[f"{name}_s"], row[f"{name}_cpu_s"] = round(wall, 3), round(cpu, 2)
        return row
    finally:
        server.terminate()
        server.wait(timeout=30)


def targets(rows: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    out = []
    for row in rows:
        d = row["D"]
        if d >= 10_000:
            after = row["second_question_first_call_after_import_s"]
            out.append((f"D={d}: second question's first call within 1 s (r3con imported)", after < 1.0,
                        f"{after} s; {row['second_question_first_call_s']} s from the command's start; "
                        f"{row['no_store_first_call_after_import_s']} s without the store"))
        if d >= 100_000:
            out += [
                (f"D={d}: peak RSS < 2 GiB", row["peak_rss_mib"] < 2048, f"{row['peak_rss_mib']} MiB"),
                (f"D={d}: harness CPU < 2 ms a call", row["cpu_ms_per_call"] < 2, f"{row['cpu_ms_per_call']} ms"),
                (f"D={d}: run folder < 30 KiB a document", row["run_folder_kib_per_doc"] < 30,
                 f"{row['run_folder_kib_per_doc']} KiB"),
                (f"D={d}: resumed after SIGKILL, no successful call repeated", row["repeated_successful_calls"] == 0
                 and row["killed_at_calls"] is not None, f"{row['repeated_successful_calls']} repeated"),
            ]
    if len(rows) > 1:
        per_doc = [r["prompt_tokens_per_doc"] for r in rows]
        out.append(("prompt tokens per document flat (within 10%)", max(per_doc) <= 1.1 * min(per_doc),
                    " / ".join(f"{p:.0f}" for p in per_doc)))
    return out


COLUMNS = ("D", "calls", "wall_s", "peak_rss_mib", "cpu_ms_per_call", "prompt_tokens_per_doc", "run_folder_kib_per_doc",
           "repeated_successful_calls", "lost_in_flight", "second_question_first_call_s",
           "second_question_first_call_after_import_s", "no_store_first_call_after_import_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--chars", type=int, default=3000)
    parser.add_argument("--budget", type=int, default=4000, help="notes budget (tokens)")
    parser.add_argument("--kill-at", type=float, default=0.5, help="SIGKILL after this share of the calls (0: never)")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "r3con-bench-store"))
    parser.add_argument("--first-call-only", action="store_true",
                        help="only the second question's first call, over a corpus an earlier run of this script stored")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.first_call_only:
        for size in (int(s) for s in args.sizes.split(",")):
            print(json.dumps(first_calls(size, args)), flush=True)
        return
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        row = one(size, args)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    checks = targets(rows)
    if args.json:
        print(json.dumps({"latency_model": LATENCY, "rows": rows,
                          "targets": [{"target": t, "pass": p, "measured": m} for t, p, m in checks]}))
        return
    print(" | ".join(COLUMNS))
    for row in rows:
        print(" | ".join(str(row[c]) for c in COLUMNS))
    for target, ok, measured in checks:
        print(f"{'PASS' if ok else 'FAIL'} {target}: {measured}")


if __name__ == "__main__":
    main()
