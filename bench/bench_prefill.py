"""What the llama.cpp server prefills for r3con against the authors' reference `r3context` 0.3.0.

    python3 -m venv /work/venv-r3context && /work/venv-r3context/bin/pip install -q r3context==0.3.0
    PYTHONPATH=src .venv/bin/python bench/bench_prefill.py [--slots 1,4] [--reps 3] [--rounds 2]
        [--docs 2,3,6,10,11,13,17,19 | all] [--cut CHARS] [--reference /work/venv-r3context/bin/r3con] [--whole] [--keep] [--json]

Starts `llama-server` (../shared/llama.cpp, the tiny random model whose replies end by themselves) with
`-np 1` and `-np 4` (the same context a slot either way, `--slot-ctx` tokens, 16,384 by default; one
thread, which a busy shared machine runs many times faster than two; its defaults otherwise: prompt
caching and its host-memory prompt cache on), and puts a small recording proxy in front of it, so both systems'
requests go through the same measurement. For each slot count and repetition it runs, each against a
freshly started server (nothing cached from the run before):

- r3con: `r3con run QUESTION FILES --base-url PROXY --model M --rounds R --no-cache` (the CLI as a user
  runs it, its own reply cache off so every call reaches the server);
- the reference: `r3con run QUESTION FILES --model openai/M --base-url PROXY --relevance-rounds R`
  (r3context's CLI; its model string is LiteLLM's, pointed at the same server).

Each chat completion's reply carries the server's own count of the prompt tokens it computed
(`timings.prompt_n`: the prompt less what its prefix cache served) beside `usage.prompt_tokens`. The
bench sums both per system and stage and prints the ratio r3con / reference of the relevance rounds'
prefill (the stage both systems run alike, over the same rounds), medians over the repetitions.

Each run is stopped at its first call of a later stage (the proxy refuses it): with random weights the
reference's schema stage (Python code, five tries) fails and its run ends there, while r3con's schema,
population and agent go on (their replies are JSON by the server's grammar). `--whole` lets both go on
and prints the whole runs' sums too ("all"), not comparable for that reason. `--keep` keeps the work
folder: each run's calls.jsonl (per call: stage, round, document, prompt_n, prompt_tokens, cached, the
messages' sizes), the servers' and the CLIs' logs.

Documents: Dracula's letters and the Demeter's log by number (../shared/data/dracula), or `--docs all`, each
cut to its first `--cut` characters when given (copies in the work folder); the question its `death_toll`.
r3con's notes budget follows the slot's window: at 16,384 tokens it binds on the 46 cut documents (a
selection per call), at 32,768 every note is shown in full, as the reference shows them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
SHARED = next((p for p in (ROOT.parent / "shared", ROOT.parents[1] / "shared", Path("/work/shared")) if p.is_dir()),
              Path("/work/shared"))
LLAMA = SHARED / "llama.cpp"
MODEL = LLAMA / "tiny-random-qwen2-short.gguf"
DRACULA = SHARED / "data" / "dracula"
REFERENCE = Path("/work/venv-r3context/bin/r3con")
SLOT_CTX = 16384  # tokens a slot holds, at any slot count (`--slot-ctx`)
REFERENCE_RELEVANCE = "task-conditioned summary"  # in the reference's relevance system prompt (its prompts/relevance/v1.yaml)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Record:
    """What the proxy saw of one chat completion."""

    system: str
    stage: str
    prompt_n: int
    prompt_tokens: int
    cached: int
    status: int
    doc: str = ""
    round: str = ""
    shape: str = ""  # each message's role and length in characters


@dataclass
class Proxy:
    """Forwards everything to `upstream`; keeps each chat completion's prompt counts, labelled with the
    system that is running (`label`) and its stage (r3con's X-R3con-Stage header; the reference's from its prompt)."""

    upstream: str
    label: str = ""
    records: list[Record] = field(default_factory=list)
    relevance_only: bool = True  # refuse the first call of a later stage, and say so (`past`)
    past: threading.Event = field(default_factory=threading.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if self.relevance_only and request.path.endswith("/chat/completions") and self._stage(request, body) != "relevance":
            self.past.set()
            return web.Response(status=503, text="the bench measures the relevance stage only")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in {"host", "content-length"}}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as session, session.request(
                request.method, self.upstream + request.path_qs, data=body, headers=headers) as up:
            data = await up.read()
            if request.path.endswith("/chat/completions") and request.method == "POST":
                self.records.append(self._record(request, body, data, up.status))
            out = {k: v for k, v in up.headers.items()
                   if k.lower() not in {"content-length", "transfer-encoding", "content-encoding", "connection"}}
            return web.Response(body=data, status=up.status, headers=out)

    def _record(self, request: web.Request, body: bytes, data: bytes, status: int) -> Record:
        try:
            reply = json.loads(data)
        except ValueError:
            reply = {}
        timings, usage = reply.get("timings") or {}, reply.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        messages = json.loads(body).get("messages") or []
        shape = " ".join(f"{m.get('role')}:{len(str(m.get('content') or ''))}" for m in messages)
        return Record(self.label, self._stage(request, body), int(timings.get("prompt_n") or 0),
                      int(usage.get("prompt_tokens") or 0), int(details.get("cached_tokens") or 0), status,
                      request.headers.get("X-R3con-Doc", ""), request.headers.get("X-R3con-Round", ""), shape)

    @staticmethod
    def _stage(request: web.Request, body: bytes) -> str:
        stage = request.headers.get("X-R3con-Stage")
        if stage:
            return stage
        messages = json.loads(body).get("messages") or [{}]
        first = messages[0].get("content") or ""
        return "relevance" if isinstance(first, str) and REFERENCE_RELEVANCE in first else "other"


def start_proxy(proxy: Proxy) -> int:
    """Serve `proxy` on 127.0.0.1 from a thread of its own; its port."""
    port = free_port()
    ready = threading.Event()

    def serve() -> None:
        async def main() -> None:
            app = web.Application(client_max_size=1 << 28)
            app.router.add_route("*", "/{tail:.*}", proxy.handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            ready.set()
            await asyncio.Event().wait()
        asyncio.run(main())

    threading.Thread(target=serve, daemon=True).start()
    ready.wait(10)
    return port


class Server:
    """llama-server with `slots` slots of SLOT_CTX tokens, on a port of its own."""

    def __init__(self, slots: int, log: Path, slot_ctx: int = SLOT_CTX):
        self.port = free_port()
        self.log = log
        self.args = [str(LLAMA / "llama-server"), "-m", str(MODEL), "--host", "127.0.0.1", "--port", str(self.port),
                     "-c", str(slot_ctx * slots), "-np", str(slots), "-t", "1"]
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
                    if b" 200 " in s.recv(64):
                        return self
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"llama-server did not start; see {self.log}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)


def model_id(base: str) -> str:
    import urllib.request
    with urllib.request.urlopen(base + "/v1/models", timeout=10) as r:
        return str(json.load(r)["data"][0]["id"])


def r3con_command(base: str, model: str, question: str, files: list[Path], rounds: int,
                  work: Path) -> tuple[list[str], dict[str, str]]:
    cmd = [sys.executable, "-m", "r3con", "run", question, *map(str, files), "--base-url", base + "/v1",
           "--model", model, "--rounds", str(rounds), "--no-cache", "--no-corpus-store", "--out", str(work / "runs"),
           "-q", "--json"]
    return cmd, {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def reference_command(exe: Path, base: str, model: str, question: str, files: list[Path], rounds: int,
                      work: Path) -> tuple[list[str], dict[str, str]]:
    cmd = [str(exe), "run", question, *map(str, files), "--model", f"openai/{model}", "--base-url", base + "/v1",
           "--relevance-rounds", str(rounds), "--logs-dir", str(work / "logs")]
    env = {**os.environ, "OPENAI_API_KEY": "none", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PYTHONPATH", None)
    return cmd, env


def run_until(cmd: list[str], env: dict[str, str], log: Path, past: threading.Event) -> int:
    """Run `cmd`; stop it once the proxy has seen a call of a later stage (`past`)."""
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)
        deadline = time.monotonic() + 1800
        while proc.poll() is None:
            if past.is_set() or time.monotonic() > deadline:
                proc.terminate()
                return proc.wait(30)
            time.sleep(0.2)
        return proc.returncode


def sums(records: list[Record]) -> dict[str, dict[str, int]]:
    """Per stage (and 'all'): calls, prompt_n, prompt_tokens, cached."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "prompt_n": 0, "prompt_tokens": 0, "cached": 0})
    for r in records:
        for key in (r.stage, "all"):
            s = out[key]
            s["calls"] += 1
            s["prompt_n"] += r.prompt_n
            s["prompt_tokens"] += r.prompt_tokens
            s["cached"] += r.cached
    return dict(out)


def measure(args: argparse.Namespace, files: list[Path], question: str, work: Path) -> dict[str, Any]:
    proxy = Proxy("", relevance_only=not args.whole)
    port = start_proxy(proxy)
    base = f"http://127.0.0.1:{port}"
    results: dict[str, Any] = {}
    for slots in args.slots:
        runs: dict[str, list[dict[str, dict[str, int]]]] = {"r3con": [], "reference": []}
        for rep in range(args.reps):
            for system in [x for x in (("r3con", "reference") if rep % 2 == 0 else ("reference", "r3con"))
                           if x in args.systems]:
                here = work / f"np{slots}-{rep}-{system}"
                here.mkdir(parents=True)
                with Server(slots, here / "server.log", args.slot_ctx) as server:
                    proxy.upstream = f"http://127.0.0.1:{server.port}"
                    proxy.label, proxy.records = system, []
                    proxy.past.clear()
                    model = model_id(proxy.upstream)
                    t0 = time.monotonic()
                    cmd, env = (r3con_command(base, model, question, files, args.rounds, here) if system == "r3con"
                                else reference_command(args.reference, base, model, question, files, args.rounds, here))
                    rc = run_until(cmd, env, here / f"{system}.log", proxy.past)
                    with (here / "calls.jsonl").open("w") as f:
                        f.writelines(json.dumps(asdict(r)) + "\n" for r in proxy.records)
                    got = sums(proxy.records)
                    runs[system].append(got)
                    rel = got.get("relevance", {})
                    print(f"  -np {slots} rep {rep} {system}: exit {rc}, {time.monotonic() - t0:.0f} s, relevance "
                          f"{rel.get('calls', 0)} calls prompt_n {rel.get('prompt_n', 0)} of "
                          f"{rel.get('prompt_tokens', 0)}; all {got.get('all', {}).get('prompt_n', 0)}", flush=True)
        results[str(slots)] = runs
    return results


def cut_copies(files: list[Path], chars: int, folder: Path) -> list[Path]:
    """Copies of `files` in `folder`, each cut to its first `chars` characters (at a line's end where one is near)."""
    folder.mkdir(parents=True)
    out = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        if len(text) > chars:
            head = text[:chars]
            text = head[:head.rfind("\n")] if head.rfind("\n") > chars // 2 else head
        (folder / f.name).write_text(text, encoding="utf-8")
        out.append(folder / f.name)
    return out


def median_of(runs: list[dict[str, dict[str, int]]], stage: str, key: str) -> float:
    return statistics.median(r.get(stage, {}).get(key, 0) for r in runs) if runs else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slots", default="1,4", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--docs", default="2,3,6,10,11,13,17,19", help="Dracula document numbers, or 'all'")
    ap.add_argument("--cut", type=int, default=0, help="cut each document to its first CUT characters (0: whole)")
    ap.add_argument("--slot-ctx", type=int, default=SLOT_CTX, help="tokens a slot holds (llama-server -c is this times the slots)")
    ap.add_argument("--reference", type=Path, default=REFERENCE, help="r3context's r3con executable")
    ap.add_argument("--systems", default="r3con,reference", type=lambda s: s.split(","),
                    help="which to run (r3con alone, to try a change against the reference's figure)")
    ap.add_argument("--whole", action="store_true", help="let each run go on past the relevance stage")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, run folders)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    manifest = {d["doc"]: d["file"] for d in json.loads((DRACULA / "manifest.json").read_text())}
    numbers = sorted(manifest) if args.docs == "all" else [int(n) for n in args.docs.split(",")]
    files = [DRACULA / "docs" / manifest[n] for n in numbers]
    question = json.loads((DRACULA / "questions.json").read_text())[0]["question"]
    work = Path(tempfile.mkdtemp(prefix="bench_prefill-"))
    if args.cut:
        files = cut_copies(files, args.cut, work / "docs")
    print(f"{len(files)} documents, {args.rounds} rounds, work folder {work}", flush=True)
    results = measure(args, files, question, work)
    if args.json:
        print(json.dumps(results, indent=1))
    print("\nmedians over the repetitions; prompt_n = what the server computed, prompt = what was sent")
    print("| slots | stage | r3con prompt_n | reference prompt_n | ratio | r3con prompt | reference prompt |")
    print("|---|---|---|---|---|---|---|")
    for slots, runs in results.items():
        for stage in ("relevance", "all"):
            ours, ref = median_of(runs["r3con"], stage, "prompt_n"), median_of(runs["reference"], stage, "prompt_n")
            ratio = f"{ours / ref:.2f}x" if ref else "-"
            print(f"| {slots} | {stage} | {ours:,.0f} | {ref:,.0f} | {ratio} | "
                  f"{median_of(runs['r3con'], stage, 'prompt_tokens'):,.0f} | "
                  f"{median_of(runs['reference'], stage, 'prompt_tokens'):,.0f} |")
        ratios = [o.get("relevance", {}).get("prompt_n", 0) / r["relevance"]["prompt_n"]
                  for o, r in zip(runs["r3con"], runs["reference"], strict=False) if r.get("relevance", {}).get("prompt_n")]
        if ratios:
            print(f"  -np {slots}: relevance prefill ratio per repetition: {', '.join(f'{x:.2f}' for x in ratios)}")
    if not args.keep:
        import shutil
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
