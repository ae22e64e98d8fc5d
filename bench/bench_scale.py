"""How r3con scales: calls, prompt tokens, prefix-cache share, harness CPU and memory, D = 10 to 1,000.

    .venv/bin/python bench/bench_scale.py [--sizes 10,46,200,1000] [--rounds 2] [--rounds-large 2]
                                          [--budget 4000] [--budgets-200 4000,2000,1000,1] [--note-sentences 3]
                                          [--cache-tokens N] [--orders alternate,corpus] [--adapt on,off]
                                          [--full-at-1000] [--json]

Every configuration runs in its own process (so that peak memory is its own) against the scripted
server in another process (so that harness CPU excludes the server), with the server's latency model
on: a fixed cost per call, per uncached and cached prompt token, per completion token; the server's
prefix cache holds 2M blocks of 64 characters (128 MB of prompt text), enough not to evict. Corpora
are real documents from ../shared/data: D = 10 and 46 are Dracula's first documents (46: all of them,
whole); D = 200 and 1,000 take Dracula's 46 and add Loong's English papers (then its financial
reports, some in Chinese), every document cut to its first `--chars` characters (16,000; at D = 1,000
`--chars-large`, 6,000, to stay within minutes).

Configurations per D: layout `cache` or `paper`, and selective notes `on` (`--budget` tokens; at
D = 200 the cache layout tries each of `--budgets-200`) or `off` (every note in full, as the paper).
The paper layout without selection at D = 1,000 sends every note with every call (about 100k tokens
a call); it runs only with --full-at-1000.

Printed per configuration: wall time, calls, prompt tokens (all stages and relevance + populate),
the share of prompt tokens served from the prefix cache, the share of the documents' own tokens
served from it, population's own prompt tokens, uncached tokens and cached share (its calls share the
task, schema and final notes), harness CPU per call (this process's CPU time over calls: the pipeline and the
HTTP transport, not the server nor the sandbox worker), peak RSS; and, for reference, the CPU per call of
a bare aiohttp session posting the same bodies against the same server (the floor under r3con's).
`--note-sentences N` makes the scripted notes quote up to N sentences (3 by default).
`--cache-tokens N` bounds the server's prefix cache to about N tokens (LRU, a prompt's end evicted
before its beginning, as vLLM does); `--orders alternate,corpus` and `--adapt on,off` run the cache
layout also with every stage in corpus order, and without placement from the replies
(`stages.plan`), to measure what each saves when the cache cannot hold the corpus. Then the issue's targets, each PASS or FAIL:
  1. D = 200: relevance + populate prompt tokens of `cache`+`on` at most a third of `paper`+`off`
     (counted as uncached prompt tokens, the part an endpoint must prefill; total tokens printed too).
     A budget under 50 tokens (the default sweep's 1) shows no note in full: its ratio is printed as
     the floor, what the cache layout prefills for the documents, instructions and notes index alone;
  2. D = 46 (Dracula): at least 60% of the prompt tokens of the per-document calls (relevance and
     populate: documents, notes and instructions) served from cache; the share of the documents'
     own tokens is printed beside (below 2/3 when short documents go after their shared notes);
  3. D = 1,000: under 1 GiB resident memory and under 2 ms of harness CPU per call.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("R3CON_DATA") or ROOT.parent / "shared" / "data")
TASK = "Who travelled to Whitby or wrote about it, when, and what did they report there?"
LATENCY = {"per_call_ms": 5.0, "per_prompt_token_ms": 0.0002, "per_cached_token_ms": 0.00002,
           "per_completion_token_ms": 0.005}
SERVER = """
import sys
from r3con.testing import Behaviour, LatencyModel, serve
serve(0, max_model_len=100_000_000, behaviour=Behaviour(latency=LatencyModel(**{latency}), cache_blocks={blocks},
                                                       note_sentences={sentences}))
"""


def corpus(size: int, chars: int) -> list[tuple[str, str]]:
    """`size` (title, text) pairs: Dracula's documents first, then Loong's, cut to `chars` when beyond Dracula."""
    from r3con.corpus.documents import load_documents

    dracula = load_documents([DATA / "dracula" / "docs"])
    docs = [(d.title, d.text if size <= len(dracula) else d.text[:chars]) for d in dracula][:size]
    if len(docs) < size:
        pool = sorted((DATA / "loong" / "doc" / "paper").glob("*")) + sorted((DATA / "loong" / "doc" / "financial").glob("*"))
        random.Random(7).shuffle(pool)
        for path in pool:
            if len(docs) >= size:
                break
            text = path.read_text(encoding="utf-8", errors="replace")[:chars].strip()
            if text:
                docs.append((path.stem[:80], text))
    return docs


UNBOUNDED_BLOCKS = 2_000_000  # 128 MB of prompt text: no configuration here evicts


def start_server(sentences: int = 3, cache_tokens: int = 0) -> tuple[subprocess.Popen[str], str]:
    """The scripted server in another process; `cache_tokens` bounds its prefix cache (0: unbounded)."""
    blocks = max(1, cache_tokens // 16) if cache_tokens else UNBOUNDED_BLOCKS  # a 64-character block: ~16 tokens
    code = SERVER.format(latency=LATENCY, sentences=sentences, blocks=blocks)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("PORT="):
        proc.kill()
        raise SystemExit(f"the scripted server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{line.split('=', 1)[1]}/v1"


def one(size: int, layout: str, notes: str, rounds: int, budget: int, chars: int, sentences: int,
        cache_tokens: int = 0, order: str = "alternate", adapt: str = "on") -> dict[str, Any]:
    """Run one configuration in this process; the measurements as a dict.

    `order`: `alternate` (stages send their calls in alternating directions, r3con's default) or
    `corpus` (every stage in corpus order), to measure what alternating saves under a bounded cache;
    `adapt` `off` keeps later stages from placing their shared part first when the replies showed
    that the documents' prefixes were not kept (`stages.plan`).
    """
    import r3con
    from r3con.tokens import estimate_tokens

    async def held(task: str, docs: Any, settings: Any) -> Any:
        """The run as `r3con run` makes it: held (`r3con.start`), its plan made, its events followed."""
        run = await r3con.start(task, docs, settings)
        run.listen(lambda event: None)  # a follower, as the CLI's progress display is
        return await run.result()

    docs = r3con.documents_from_texts(corpus(size, chars))
    server, base_url = start_server(sentences, cache_tokens)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = r3con.Settings.resolve(
                env={}, base_url=base_url, api_key="bench", out_dir=Path(tmp), cache=False, layout=layout,
                notes_budget_tokens=budget if notes == "on" else 0, rounds=rounds, concurrency=16,
                context_window=32_768, max_steps=4, sandbox_timeout_s=120,
                alternate_order=order == "alternate", adaptive_placement=adapt == "on",
                log_calls="full",  # the document-cache figures read each call's prompt from calls.jsonl
            )
            transport = "aiohttp"
            cpu, wall = time.process_time(), time.perf_counter()
            result = asyncio.run(held(TASK, docs, settings))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before this script's analysis
            manifest = json.loads((result.run_dir / "manifest.json").read_text())
            selection = manifest["notes_selection"]
            written = [n for n in result.notes[0].values() if n and n != "NONE"]  # round 1's
            note_tokens = sum(estimate_tokens(n) for n in written) / max(1, len(written))
            part_tokens, part_cached = document_cache(result.run_dir / "calls.jsonl")
    finally:
        server.terminate()
        server.wait(timeout=10)
    per_doc = [result.by_stage[s] for s in ("relevance", "populate") if s in result.by_stage]
    doc_prompt = sum(u.prompt_tokens for u in per_doc)
    doc_cached = sum(u.cached_tokens for u in per_doc)
    total = result.usage
    filling = result.by_stage.get("populate")
    return {
        "D": size, "layout": layout, "notes": notes, "budget": budget if notes == "on" else None, "rounds": rounds,
        "note_sentences": sentences, "note_tokens": round(note_tokens, 1), "transport": transport,
        "cache_tokens": cache_tokens or None, "order": order, "adapt": adapt,
        "document_reuse": manifest["layout"].get("document_reuse"),
        "parts": len(result.parts),
        "wall_s": round(wall, 2), "calls": total.calls, "prompt_tokens": total.prompt_tokens,
        "cached_share": round(total.cached_tokens / max(1, total.prompt_tokens), 3),
        "doc_prompt_tokens": doc_prompt, "doc_uncached_tokens": doc_prompt - doc_cached,
        "doc_cached_share": round(doc_cached / max(1, doc_prompt), 3),
        "populate_calls": filling.calls if filling else 0,
        "populate_prompt_tokens": filling.prompt_tokens if filling else 0,
        "populate_uncached_tokens": filling.prompt_tokens - filling.cached_tokens if filling else 0,
        "populate_cached_share": round(filling.cached_tokens / max(1, filling.prompt_tokens), 3) if filling else 0.0,
        "cpu_ms_per_call": round(1000 * cpu / max(1, total.calls), 3),
        "peak_rss_mib": round(peak_rss, 1),
        "doc_part_tokens": part_tokens, "doc_part_cached_share": round(part_cached / max(1, part_tokens), 3),
        "selected_calls": sum(v.get("selected", 0) for v in selection.get("calls", {}).values()),
        "degraded": len(result.degraded),
    }


def document_cache(calls_log: Path) -> tuple[int, int]:
    """Tokens of the document part of relevance and populate prompts, and how many of them were cached.

    The prompt is rebuilt as the scripted server sees it, the document located in it, and its tokens
    counted with the server's rule; a call's cached tokens cover the document as far as they reach.
    """
    total = cached = 0
    with calls_log.open(encoding="utf-8") as lines:
        for line in lines:
            doc, doc_cached = _document_tokens(json.loads(line))
            total, cached = total + doc, cached + doc_cached
    return total, cached


def _document_tokens(call: dict[str, Any]) -> tuple[int, int]:
    """(tokens of the document in a relevance or populate call's prompt, how many of them were cached)."""
    from r3con.testing._text import tokens

    if call.get("stage") not in ("relevance", "populate") or "usage" not in call:
        return 0, 0
    prompt = "".join(f"{m['role']}:{_text(m['content'])}\n" for m in call["request"]["messages"])
    start = prompt.find("<document number=")
    end = prompt.find("\n</document>", start)
    if start < 0 or end < 0:
        return 0, 0
    end += len("\n</document>")
    before, upto = tokens(prompt[:start]), tokens(prompt[:end])
    return upto - before, max(0, min(call["usage"]["cached_tokens"], upto) - before)


def _text(content: Any) -> str:
    return "".join(p.get("text", "") for p in content) if isinstance(content, list) else str(content)


def bare_baseline(calls: int = 300, words: int = 4000) -> dict[str, Any]:
    """CPU per call of a bare aiohttp session (no r3con) posting prompts of `words` words: the floor under r3con's."""
    import aiohttp

    server, base_url = start_server()
    body = "word " * words

    async def go() -> float:
        session = aiohttp.ClientSession(headers={"Authorization": "Bearer bench"})
        limit = asyncio.Semaphore(16)

        async def call(i: int) -> None:
            async with limit:
                payload = {"model": "m", "max_tokens": 100, "messages": [
                    {"role": "system", "content": "sys"}, {"role": "user", "content": f"{body}{i}"}]}
                async with session.post(f"{base_url}/chat/completions", data=json.dumps(payload).encode(),
                                        headers={"Content-Type": "application/json"}) as reply:
                    json.loads(await reply.read())

        await call(-1)
        cpu = time.process_time()
        await asyncio.gather(*(call(i) for i in range(calls)))
        cpu = time.process_time() - cpu
        await session.close()
        return cpu

    try:
        cpu = asyncio.run(go())
    finally:
        server.terminate()
        server.wait(timeout=10)
    return {"calls": calls, "prompt_chars": len(body), "cpu_ms_per_call": round(1000 * cpu / calls, 3)}


def spawn(**config: Any) -> dict[str, Any]:
    """`one(**config)` in a process of its own."""
    done = subprocess.run([sys.executable, __file__, "--one", json.dumps(config)], capture_output=True, text=True)
    if done.returncode != 0:
        return {"D": config["size"], "layout": config["layout"], "notes": config["notes"],
                "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


COLUMNS = ("D", "layout", "notes", "budget", "order", "adapt", "cache_tokens", "rounds", "parts", "wall_s", "calls", "prompt_tokens", "cached_share",
           "doc_prompt_tokens", "doc_uncached_tokens", "doc_cached_share", "doc_part_cached_share",
           "populate_prompt_tokens", "populate_uncached_tokens", "populate_cached_share",
           "cpu_ms_per_call", "transport", "peak_rss_mib", "selected_calls", "note_tokens")


FLOOR_BUDGET = 50  # a notes budget under any note's size: what is left is the floor of the cache layout


def targets(rows: list[dict[str, Any]]) -> list[tuple[str, bool | None, str]]:
    rows = [r for r in rows if r.get("order", "alternate") == "alternate"
            and r.get("adapt", "on") == "on"]  # the targets are for r3con as it runs

    def find(d: int, layout: str, notes: str) -> dict[str, Any] | None:
        return next((r for r in rows if r["D"] == d and r["layout"] == layout and r["notes"] == notes
                     and "error" not in r), None)

    out: list[tuple[str, bool | None, str]] = []
    paper = find(200, "paper", "off")
    ours_rows = [r for r in rows if r["D"] == 200 and r["layout"] == "cache" and r["notes"] == "on" and "error" not in r]
    for ours in ours_rows if paper else []:
        assert paper is not None
        ratio = ours["doc_uncached_tokens"] / max(1, paper["doc_uncached_tokens"])
        total = ours["doc_prompt_tokens"] / max(1, paper["doc_prompt_tokens"])
        if ours["budget"] < FLOOR_BUDGET:  # no note fits in full: the floor under every layout, not a setting to use
            out.append((f"D=200 floor, notes budget {ours['budget']} (no note in full; each document prefilled once, "
                        "plus the instructions and the notes index)", None,
                        f"uncached {ratio:.3f}x of the paper layout's (total prompt tokens {total:.3f}x)"))
            continue
        out.append((f"D=200 relevance+populate input tokens (cache layout, notes budget {ours['budget']}) <= 1/3 of "
                    "the paper layout's without selection", ratio <= 1 / 3,
                    f"uncached {ratio:.3f}x (total prompt tokens {total:.3f}x)"))
    if not ours_rows or not paper:
        out.append(("D=200 relevance+populate input tokens <= 1/3 of paper without selection", None, "not run"))
    for notes in ("off", "on"):
        dracula = find(46, "cache", notes)
        if dracula is None:
            out.append((f"D=46 (Dracula) >= 60% of per-document prompt tokens cached (notes {notes})", None, "not run"))
            continue
        share, part = dracula["doc_cached_share"], dracula["doc_part_cached_share"]
        out.append((f"D=46 (Dracula) >= 60% of per-document (relevance + populate) prompt tokens cached "
                    f"(cache layout, notes {notes})", share >= 0.6,
                    f"{share:.1%} of their prompt tokens; {part:.1%} of the documents' own tokens"))
    large = [r for r in rows if r["D"] == 1000 and "error" not in r]
    if large:
        rss, cpu = max(r["peak_rss_mib"] for r in large), max(r["cpu_ms_per_call"] for r in large)
        out.append(("D=1000 peak RSS < 1 GiB", rss < 1024, f"{rss:.0f} MiB (worst configuration)"))
        out.append(("D=1000 harness CPU < 2 ms per call", cpu < 2.0, f"{cpu:.2f} ms (worst configuration)"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,46,200,1000")
    parser.add_argument("--rounds", type=int, default=2, help="relevance rounds up to D = 200")
    parser.add_argument("--rounds-large", type=int, default=2, help="relevance rounds at D = 1,000")
    parser.add_argument("--budget", default="4000", help="notes budgets (tokens, comma-separated) when selection is on")
    parser.add_argument("--budgets-200", default="4000,2000,1000,1",
                        help="the budgets tried at D = 200 (cache layout); one under 50 tokens measures the floor")
    parser.add_argument("--chars", type=int, default=16_000, help="characters kept of each document beyond Dracula")
    parser.add_argument("--chars-large", type=int, default=6_000, help="the same at D = 1,000")
    parser.add_argument("--full-at-1000", action="store_true", help="also run the paper layout without selection at D = 1,000")
    parser.add_argument("--note-sentences", type=int, default=3,
                        help="sentences per scripted note (3: short notes; real models' run to hundreds of words)")
    parser.add_argument("--cache-tokens", type=int, default=0,
                        help="bound the server's prefix cache to about this many tokens (LRU; default: unbounded)")
    parser.add_argument("--orders", default="alternate",
                        help="call orders to run: alternate (r3con's: stages alternate direction), corpus, or both")
    parser.add_argument("--adapt", default="on",
                        help="cache layout: on (r3con's: shared part first once documents were seen not kept), off, or both")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one == "bare":
        print(json.dumps(bare_baseline()))
        return
    if args.one:
        print(json.dumps(one(**json.loads(args.one))))
        return
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        large = size >= 1000
        for layout in ("cache", "paper"):
            for notes in ("on", "off"):
                if large and notes == "off" and not args.full_at_1000:
                    continue
                sweep = args.budgets_200 if size == 200 and layout == "cache" else args.budget
                for budget, order, adapt in itertools.product(
                        [int(b) for b in sweep.split(",")] if notes == "on" else [0],
                        args.orders.split(",") if layout == "cache" else ["alternate"],
                        args.adapt.split(",") if layout == "cache" else ["on"]):
                    row = spawn(size=size, layout=layout, notes=notes, rounds=args.rounds_large if large else args.rounds,
                                budget=budget, chars=args.chars_large if large else args.chars,
                                sentences=args.note_sentences, cache_tokens=args.cache_tokens, order=order,
                                adapt=adapt)
                    rows.append(row)
                    if not args.json:
                        print(" ".join(f"{k}={row.get(k)}" for k in ("D", "layout", "notes", "budget", "order", "adapt", "wall_s",
                                                                     "calls", "error") if k in row),
                              file=sys.stderr, flush=True)
    baseline = subprocess.run([sys.executable, __file__, "--one", "bare"], capture_output=True, text=True)
    bare = json.loads(baseline.stdout.strip().splitlines()[-1]) if baseline.returncode == 0 else {"error": baseline.stderr[-300:]}
    checks = targets(rows)
    if args.json:
        print(json.dumps({"latency_model": LATENCY, "rows": rows, "bare_aiohttp": bare,
                          "targets": [{"target": t, "pass": p, "measured": m} for t, p, m in checks]}))
        return
    print(f"latency model: {LATENCY}")
    print(" | ".join(COLUMNS))
    for row in rows:
        print(" | ".join(str(row.get(c, row.get("error", ""))) for c in COLUMNS))
    print(f"reference, a bare aiohttp session (no r3con), same server: {bare}")
    for target, ok, measured in checks:
        verdict = "n/a " if ok is None else ("PASS" if ok else "FAIL")
        print(f"{verdict} {target}: {measured}")


if __name__ == "__main__":
    main()
