"""`--engine ray` against the in-process run, and the notes selection's cost per read as the notes grow.

    .venv/bin/python bench/bench_engine.py runs [--sizes 1000,10000] [--chars 600] [--concurrency 16] [--engines local,ray]
                                                [--same-as RUN_DIR] [--keep]
    .venv/bin/python bench/bench_engine.py select [--notes 100000,1000000] [--calls 50] [--budget 4000]
    .venv/bin/python bench/bench_engine.py heap [--size 3000] [--chars 600] [--engine local]
    .venv/bin/python bench/bench_engine.py load [--sizes 10000,100000] [--chars 600]
    .venv/bin/python bench/bench_engine.py plan [--notes 100000] [--kinds random,people] [--reads 5000] [--repeats 3] [--where driver,ray]

`runs`: D documents of about `--chars` characters (a person, an age, a city and filler), written as D
files; the scripted server in its own process; `r3con run` in its own process (two relevance rounds,
schema, population, the agent's answer; LLM cache on, empty; no corpus store), once in-process and
once with `--engine ray --ray-address` joining a local cluster started first (`ray start --head --block
--num-cpus 2` on a free port, the bench's own: stopped at the end without touching other clusters), as a
driver joins a cluster. Printed per engine: wall seconds, the driver's peak RSS
(VmHWM of the driver process alone, polled; the cluster's processes are not the driver's), the
driver's CPU a call (user + system of the driver and what it waited for: the sandbox; not the scripted
server's, which figures before 2026-12-06 counted as well), and whether
the notes, schema, records and answer are byte for byte the in-process run's (or, with `--same-as RUN_DIR`
and Ray alone, an in-process run folder's of the same D, kept from an earlier `--keep`).

`select`: N synthetic notes (30 words each from a 5,000-word vocabulary); one later-round selection
as relevance makes it (the task and a document's own note as the query, that note left out, ranked
BM25, as many in full as the budget takes), timed over `--calls` documents after the index is built:
index build seconds, ms of CPU a selection, and the process's peak RSS. Where `bm25s` is installed
(`pip install bm25s`: BM25 over a sparse matrix, a search index made for many documents), the same
queries through it, asking for the notes that fill the budget.

`plan`: a relevance round's planning (`_Round.plan`: a notes choice per read, each over every other note,
compact) for `--reads` of the round's readers (a seeded random sample) over N notes: on the driver, as in-process
runs make it, and on two local Ray workers (`--engine ray`: `RayWorkers.select_many`, the notes put into
the object store once, each worker's selector and index built from them), with the driver's share (its
selector without an index, the choices unpacked). Notes of two kinds: `random` (30 words from a 5,000-word
vocabulary, as `select`) and `people` ("Person N is A years old and works in CITY.", near-duplicates
that score alike, so the ranking reads far). Printed, each the median of `--repeats` plans (the two
sides in turn): wall seconds (index builds included), the driver's CPU seconds and the workers'
(/proc), CPU ms a read (both, over the reads), the ratio of the walls, the driver's and the workers'
peak RSS. `--where ray` (or `driver`) alone: one side only, so that the driver's index at 10^6
notes (6.6 GB) and the workers' two are not held at once.

`load`: what loading D documents (`load_corpus`, then their texts spooled and the heap trimmed, as a run does)
leaves in a fresh process, with r3con, Ray, numpy and pandas imported first: anonymous RSS after the imports and
after the load (MiB), the load's per document, and Python's small-object memory (`sys._debugmallocstats`): the
bytes in its blocks in use and in the free blocks of pools in use (the holes the load's transients leave).

`heap`: what the driver holds per document, by who holds it: one run in this process (tracemalloc, one
frame a block; the scripted server in its own process), snapshots at the end of relevance and at the
largest traced size (sampled every 2 s), the blocks grouped by the module and line that made them, in
bytes per document, beside the process's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

TASK = "Which people are named, how old is each, and where do they work?"
CITIES = ["Oslo", "Lima", "Pune", "Kyiv", "Accra", "Quito", "Hanoi", "Porto"]
SAME = ("notes/round-1.json", "notes/round-2.json", "schema.json", "records.json", "answer.txt")


def write_corpus(folder: Path, count: int, chars: int) -> None:
    rng = random.Random(0)
    folder.mkdir(parents=True)
    filler = "The quarterly meeting covered budgets, staffing and the office move. "
    for i in range(count):
        head = f"Person {i} is {20 + i % 50} years old and works in {CITIES[i % len(CITIES)]}. "
        body = (filler * (chars // len(filler) + 1))[: max(0, chars - len(head))]
        (folder / f"{i:07d}.txt").write_text(f"Record {i}\n\n{head}{body} Ref {rng.randrange(10**6)}.")


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", "from r3con.testing import serve; serve(0)"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    return proc, f"http://127.0.0.1:{line.split('=')[1]}/v1"


def driver(args: list[str], env: dict[str, str], timeline: Path | None = None) -> dict[str, float | int | str]:
    """Run `r3con ARGS`; wall, peak RSS of the driver process alone, CPU (with what it waited for). With
    `timeline`, its VmRSS, RssAnon and RssFile every second (seconds since the start, MiB) are appended
    there, to set against calls.jsonl's times."""
    started = time.perf_counter()
    out_file, err_file = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")  # not pipes: --json is large
    proc = subprocess.Popen([sys.executable, "-m", "r3con", *args], env=env, stdout=out_file, stderr=err_file,
                            text=True)
    peak = 0
    status = Path(f"/proc/{proc.pid}/status")
    sampled = 0.0
    while proc.poll() is None:
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            peak = max(peak, int(fields["VmHWM"].split()[0]))
            if timeline is not None and time.perf_counter() - sampled >= 1:
                sampled = time.perf_counter()
                mib = " ".join(str(int(fields[f].split()[0]) // 1024) for f in ("VmRSS", "RssAnon", "RssFile"))
                with timeline.open("a") as log:
                    log.write(f"{sampled - started:.0f} {mib}\n")
        except (OSError, KeyError, ValueError):
            pass
        time.sleep(0.1)
    proc.wait()
    out_file.seek(0)
    err_file.seek(0)
    out, err = out_file.read(), err_file.read()
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"r3con failed ({proc.returncode}): {err[-2000:]}")
    result = json.loads(out)
    return {"wall_s": round(wall, 1), "peak_rss_mib": round(peak / 1024), "calls": result["usage"]["calls"],
            "cpu_s_children_total": usage.ru_utime + usage.ru_stime, "run_dir": result["run_dir"]}


@contextlib.contextmanager
def own_cluster(env: dict[str, str]) -> Iterator[str]:
    """The address of a Ray head of this bench's own (`ray start --head --block`: a session of its own, a
    free port, its files and address file in a temporary folder), stopped at the end by signalling its
    session. Not `ray stop`, which stops every Ray process on the machine (a test suite's cluster beside
    the bench, another bench's); not /tmp/ray, where its address file would make a later `ray.init()` on
    the machine try to join it once it is gone."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    folder = Path(tempfile.mkdtemp(prefix="ray-"))  # short: Ray's socket paths under it must fit in 107 bytes
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    head = subprocess.Popen([ray, "start", "--head", "--block", "--port", str(port), "--num-cpus", "2",
                             "--temp-dir", str(folder), "--include-dashboard", "false", "--disable-usage-stats"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        assert head.stdout is not None
        said = []
        for line in head.stdout:
            said.append(line)
            if "--address=" in line:
                threading.Thread(target=head.stdout.read, daemon=True).start()  # drained: the head never blocks
                yield line.split("--address=")[1].split()[0].strip("'\"")
                break
        else:
            raise SystemExit("ray start failed: " + "".join(said[-20:]))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGTERM)
            try:
                head.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(head.pid, signal.SIGKILL)
        head.wait()
        shutil.rmtree(folder, ignore_errors=True)


def runs(sizes: list[int], chars: int, concurrency: int, engines: list[str], same_as: Path | None = None,
         keep: bool = False, timelines: Path | None = None) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    env.update(R3CON_LOCAL_PORTS="", XDG_CACHE_HOME=str(root / "xdg"), RAY_AUTH_MODE="token")  # ~/.ray/auth_token
    print("| D | engine | calls | wall s | driver peak RSS MiB | driver CPU ms / call | same outputs |")
    print("|---|---|---|---|---|---|---|")
    try:
        with own_cluster(env) as address:
            for size in sizes:
                corpus = root / f"docs-{size}"
                write_corpus(corpus, size, chars)
                seen: dict[str, dict] = {}
                for engine in engines:
                    server, base_url = start_server()  # a fresh server: its simulated prefix cache starts empty
                    try:
                        before = resource.getrusage(resource.RUSAGE_CHILDREN)
                        args = ["run", TASK, str(corpus), "--base-url", base_url, "--out", str(root / "runs"),
                                "--cache", str(root / f"{engine}-{size}.sqlite"), "--no-corpus-store",
                                "--concurrency", str(concurrency), "--json", "--quiet", "--engine", engine]
                        if engine == "ray":
                            args += ["--ray-address", address]
                        figures = driver(args, env, timelines / f"rss-{engine}-{size}.txt" if timelines else None)
                        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the driver's, not yet the server's
                    finally:
                        server.terminate()
                        server.wait()
                    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
                    seen[engine] = figures
                    local = Path(seen["local"]["run_dir"]) if "local" in seen else same_as
                    same = "" if engine == "local" or local is None else str(all(
                        (Path(figures["run_dir"]) / n).read_bytes() == (local / n).read_bytes() for n in SAME))
                    print(f"| {size:,} | {engine} | {figures['calls']:,} | {figures['wall_s']} | "
                          f"{figures['peak_rss_mib']:,} | {1000 * cpu / int(figures['calls']):.2f} | {same} |", flush=True)
    finally:
        if keep:
            print(f"kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


async def select(sizes: list[int], calls: int, budget: int) -> None:
    from r3con.corpus.documents import Document
    from r3con.notes.selection import NotesSelector, note_refs

    rng = random.Random(0)
    vocabulary = [f"w{i}" for i in range(5000)]
    try:
        import bm25s as engine  # optional: pip install bm25s
    except ImportError:
        engine = None
    top = budget // 40  # notes of about 30 words (40 tokens) that fill the budget
    print("| notes | ranking | index build s | ms CPU / selection | peak RSS MiB |")
    print("|---|---|---|---|---|")
    for size in sizes:
        docs = [Document(number=i + 1, title=f"Record {i}", text="") for i in range(size)]
        notes = {d.key: " ".join(rng.choices(vocabulary, k=30)) for d in docs}
        selector = NotesSelector(note_refs(docs, notes), budget)
        started = time.process_time()
        await selector.select(TASK, compact=True)  # the index, built once per round
        build = time.process_time() - started
        keys = [docs[i].key for i in range(0, size, max(1, size // calls))][:calls]
        started = time.process_time()
        for key in keys:
            await selector.select(f"{TASK}\n{notes[key]}", exclude=key, compact=True)
        per = 1000 * (time.process_time() - started) / len(keys)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(f"| {size:,} | r3con (`notes.NotesSelector`) | {build:.1f} | {per:.1f} | {peak:,} |", flush=True)
        del selector
        if engine is not None:  # the same reads through a search engine made for it: a sparse BM25 index
            texts = list(notes.values())
            started = time.process_time()
            index = engine.BM25()
            index.index(engine.tokenize(texts, show_progress=False), show_progress=False)
            build = time.process_time() - started
            queries = [f"{TASK}\n{notes[key]}" for key in keys]
            started = time.process_time()
            for query in queries:  # the best `top` notes (one more: the reader's own, left out)
                index.retrieve(engine.tokenize([query], show_progress=False), k=top + 1, show_progress=False)
            per = 1000 * (time.process_time() - started) / len(queries)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
            print(f"| {size:,} | bm25s (sparse BM25, top {top}) | {build:.1f} | {per:.1f} | {peak:,} |", flush=True)
            del index, texts
        del notes, docs


def plan_notes(kind: str, count: int) -> list:
    """`count` notes of `kind` (see `plan`), as NoteRefs in corpus order."""
    from r3con.notes.selection import NoteRef

    rng = random.Random(0)
    vocabulary = [f"w{i}" for i in range(5000)]
    return [NoteRef(str(i + 1), f"Record {i}", " ".join(rng.choices(vocabulary, k=30)) if kind == "random" else
                    f"Person {i} is {20 + i % 50} years old and works in {CITIES[i % len(CITIES)]}.")
            for i in range(count)]


def rss_mib(pid: int, field: str = "VmHWM") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) // 1024
    return 0


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def plan(sizes: list[int], kinds: list[str], reads: int, repeats: int, budget: int,
               sides: list[str]) -> None:
    import statistics

    import ray

    import r3con
    from r3con.engine import _ray
    from r3con.notes.selection import NotesQuery, NotesSelector

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    settings = r3con.Settings.resolve(env={}, base_url="http://127.0.0.1:9/v1", engine="ray")
    print("| notes | kind | where | reads | planning wall s | driver CPU s | workers' CPU s | CPU ms a read | "
          "wall ratio | driver peak RSS MiB | worker peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    try:
        async with _ray.workers(settings) as remote:
            pids = [w["pid"] for w in remote.to_dict()["per_worker"]]
            for size in sizes:
                for kind in kinds:
                    refs = plan_notes(kind, size)
                    readers = sorted(random.Random(1).sample(range(size), min(reads, size)))  # not every k-th:
                    # the people notes repeat every 8 and 50 positions, and so would the readers
                    queries = [NotesQuery(f"{TASK}\n{refs[i].text}", refs[i].label) for i in readers]
                    taken: dict[str, list[tuple[float, float, float]]] = {side: [] for side in sides}  # wall, CPUs
                    for _ in range(repeats):  # the sides in turn: a shared machine's load falls on both alike
                        made = []
                        for side in sides:
                            started, cpu, workers = time.perf_counter(), time.process_time(), sum(map(cpu_s, pids))
                            selector = NotesSelector(refs, budget)  # the round's, as `_Round` builds it
                            if side == "driver":
                                made.append([await selector.select(q.query, q.exclude, compact=True)
                                             for q in queries])
                            else:  # the driver's selector renders them; it builds no index
                                made.append([selector.unpack(p) for p in await remote.select_many(refs, budget, queries)])
                            taken[side].append((time.perf_counter() - started, time.process_time() - cpu,
                                                sum(map(cpu_s, pids)) - workers))
                            del selector
                        if len(made) == 2 and made[0] != made[1]:
                            raise SystemExit("the workers' choices differ from the driver's")
                        del made
                    medians = {side: [statistics.median(x) for x in zip(*runs, strict=True)]
                               for side, runs in taken.items()}
                    driver_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
                    workers_rss = "/".join(f"{rss_mib(pid):,}" for pid in pids)
                    for where, (wall, cpu, workers) in medians.items():
                        ratio = f"{medians['driver'][0] / wall:.2f}x" if where == "ray" and "driver" in medians else ""
                        print(f"| {size:,} | {kind} | {where} | {len(queries):,} | {wall:.1f} | {cpu:.1f} | "
                              f"{workers:.1f} | {1000 * (cpu + workers) / len(queries):.2f} | {ratio} | {driver_rss:,} | "
                              f"{workers_rss if where == 'ray' else ''} |", flush=True)
                    del refs, queries
    finally:
        ray.shutdown()


async def heap(size: int, chars: int, engine: str, frames: int = 1, rows: int = 15) -> None:
    import gc
    import tracemalloc

    import r3con
    from r3con.pipeline import method

    root = Path(tempfile.mkdtemp(prefix="bench-heap-"))
    write_corpus(root / "docs", size, chars)
    peak: dict[str, object] = {"bytes": 0, "snapshot": None}

    def show(title: str, snapshot: tracemalloc.Snapshot) -> None:
        every = snapshot.statistics("lineno" if frames == 1 else "traceback")  # with frames: grouped by the calls too
        code = sum(s.size for s in every if s.traceback[-1].filename.startswith("<frozen"))  # imported modules
        stats = [s for s in every if not s.traceback[-1].filename.startswith("<frozen")]
        total = sum(s.size for s in stats)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(f"\n{title}: {total / 2**20:.1f} MiB traced besides {code / 2**20:.1f} MiB of imported code, "
              f"{total / size:,.0f} B a document; peak RSS {rss:,} MiB")
        print("| B / document | MiB | blocks | made at |\n|---|---|---|---|")
        for s in stats[:rows]:
            made = " <- ".join(f"{f.filename.split('site-packages/')[-1].split('src/')[-1].split('python3.11/')[-1]}:"
                               f"{f.lineno}" for f in reversed(s.traceback))  # the line that made it first
            print(f"| {s.size / size:,.0f} | {s.size / 2**20:.1f} | {s.count:,} | {made} |")

    async def sample() -> None:
        while True:
            await asyncio.sleep(2)
            if tracemalloc.get_traced_memory()[0] > int(peak["bytes"]):  # type: ignore[call-overload]
                peak.update(bytes=tracemalloc.get_traced_memory()[0], snapshot=tracemalloc.take_snapshot())

    populate = method._populate

    async def after_relevance(*args: object, **kwargs: object) -> object:
        gc.collect()
        show("end of relevance", tracemalloc.take_snapshot())
        return await populate(*args, **kwargs)  # type: ignore[arg-type]

    method._populate = after_relevance  # type: ignore[assignment]
    server, base_url = start_server()
    tracemalloc.start(frames)
    sampler = asyncio.ensure_future(sample())
    try:
        corpus = r3con.load_corpus([root / "docs"])
        settings = r3con.Settings.resolve(env={}, base_url=base_url, out_dir=root / "runs", temperature=0,
                                          cache_path=root / "c.sqlite", engine=engine, concurrency=16)
        result = await method.run(TASK, corpus.documents, settings, inputs=corpus.inputs)
        print(f"\n{result.usage.calls:,} calls; traced peak {tracemalloc.get_traced_memory()[1] / 2**20:.1f} MiB")
        if peak["snapshot"] is not None:
            show("largest sampled", peak["snapshot"])  # type: ignore[arg-type]
    finally:
        sampler.cancel()
        server.terminate()
        server.wait()
        shutil.rmtree(root, ignore_errors=True)


def load(sizes: list[int], chars: int) -> None:
    print("| D | anonymous after imports MiB | after the load MiB | per document B | small objects in use MB | holes MB |")
    print("|---|---|---|---|---|---|")
    for size in sizes:
        root = Path(tempfile.mkdtemp(prefix="bench-load-"))
        try:
            write_corpus(root / "docs", size, chars)
            out = subprocess.run([sys.executable, __file__, "load-one", str(root / "docs")], capture_output=True,
                                 text=True, check=True)
            figures = json.loads(out.stdout.strip().splitlines()[-1])
            grown = figures["after"] - figures["imports"]
            print(f"| {size:,} | {figures['imports']} | {figures['after']} | {grown * 2**20 / size:,.0f} | "
                  f"{figures['in_use'] / 1e6:.1f} | {figures['holes'] / 1e6:.1f} |", flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)


def load_one(folder: str) -> None:
    """One `load` measure, in this fresh process; a line of JSON."""
    import gc

    import numpy  # noqa: F401 (imported before the first figure, as a run with Ray has them)
    import pandas  # noqa: F401
    import ray  # noqa: F401

    from r3con.corpus.documents import load_corpus, split_documents, spool
    from r3con.corpus.spool import TextSpool
    from r3con.pipeline.memory import give_back

    imports = rss_mib(os.getpid(), "RssAnon")
    docs = load_corpus([folder]).documents
    spool((*docs, *split_documents(docs, 3000)), TextSpool())
    gc.collect()
    give_back()
    after = rss_mib(os.getpid(), "RssAnon")
    read, write = os.pipe()
    saved = os.dup(2)
    os.dup2(write, 2)  # CPython writes the allocator's figures to C's stderr
    os.close(write)
    sys._debugmallocstats()
    os.dup2(saved, 2)
    os.close(saved)
    with os.fdopen(read) as stats:
        text = stats.read()

    def figure(name: str) -> int:
        line = next(x for x in text.splitlines() if name in x)
        return int(line.split("=")[-1].replace(",", ""))

    print(json.dumps({"imports": imports, "after": after, "documents": len(docs),
                      "in_use": figure("bytes in allocated blocks"), "holes": figure("bytes in available blocks")}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("runs")
    r.add_argument("--sizes", default="1000,10000")
    r.add_argument("--chars", type=int, default=600)
    r.add_argument("--concurrency", type=int, default=16)
    r.add_argument("--engines", default="local,ray")
    r.add_argument("--same-as", type=Path, help="an in-process run folder of the same D to compare outputs with")
    r.add_argument("--keep", action="store_true", help="keep the corpus and the run folders (their path is printed)")
    r.add_argument("--timelines", type=Path, help="a folder for each driver's RSS, anonymous and file-backed, every second (rss-ENGINE-D.txt)")
    s = sub.add_parser("select")
    s.add_argument("--notes", default="100000,1000000")
    s.add_argument("--calls", type=int, default=50)
    s.add_argument("--budget", type=int, default=4000)
    lo = sub.add_parser("load")
    lo.add_argument("--sizes", default="10000,100000")
    lo.add_argument("--chars", type=int, default=600)
    one = sub.add_parser("load-one")  # `load`'s own: one measure in a fresh process
    one.add_argument("folder")
    h = sub.add_parser("heap")
    h.add_argument("--size", type=int, default=3000)
    h.add_argument("--chars", type=int, default=600)
    h.add_argument("--engine", default="local")
    h.add_argument("--frames", type=int, default=1, help="the calls that led to each allocation, this many deep")
    h.add_argument("--rows", type=int, default=15, help="the lines (or call chains) shown, largest first")
    p = sub.add_parser("plan")
    p.add_argument("--notes", default="100000")
    p.add_argument("--kinds", default="random,people")
    p.add_argument("--reads", type=int, default=5000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--budget", type=int, default=4000)
    p.add_argument("--where", default="driver,ray")
    args = parser.parse_args()
    if args.command == "runs":
        runs([int(x) for x in args.sizes.split(",")], args.chars, args.concurrency, args.engines.split(","),
             args.same_as, args.keep, args.timelines)
    elif args.command == "plan":
        asyncio.run(plan([int(x) for x in args.notes.split(",")], args.kinds.split(","), args.reads, args.repeats,
                         args.budget, args.where.split(",")))
    elif args.command == "load":
        load([int(x) for x in args.sizes.split(",")], args.chars)
    elif args.command == "load-one":
        load_one(args.folder)
    elif args.command == "heap":
        asyncio.run(heap(args.size, args.chars, args.engine, args.frames, args.rows))
    else:
        asyncio.run(select([int(x) for x in args.notes.split(",")], args.calls, args.budget))


if __name__ == "__main__":
    main()
