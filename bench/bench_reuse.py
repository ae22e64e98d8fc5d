"""The same question over a changed corpus: what `--reuse exact` and `--reuse approximate` pay, against a fresh run.

    .venv/bin/python bench/bench_reuse.py [--docs 1000] [--chars 3000] [--budget 2000] [--json]
    .venv/bin/python bench/bench_reuse.py --dracula [--json]

A corpus of `--docs` documents (Dracula's 46, then Loong's papers and financial reports, each cut to
`--chars` characters, as bench_scale.py builds it) is run once against the scripted server (in another
process, deterministic), with a notes budget. Then it changes, step by step: 10% new documents
(their names interleaved among the old ones), one document changed (a sentence added to the middle
one), 10 documents deleted (spread over the corpus). Each step runs three ways over the changed corpus:

- fresh: no earlier run (an empty LLM cache and reuse record): every call is made;
- exact: after the exact chain's earlier runs (their LLM cache and reuse record);
- approximate: after the approximate chain's earlier runs.

Printed per step and mode: endpoint calls and prompt tokens (and their share of the fresh run's), calls
answered from the reuse record (identical requests) and from the LLM cache, per stage how many document
parts were reused; for exact, whether the notes of every round, records.json and answer.txt are byte
for byte the fresh run's; for approximate, how many documents' final notes differ from the fresh run's
and whether the answer does. Targets (issue 33): exact identical at every step, at most 20% of the
fresh run's calls for 10% growth interleaved and for 10 deleted; approximate at most 15% for 10% growth.

`--dracula`: Dracula's 46 documents whole, with no notes budget (every note is shown), 40 -> 46 twice
from a run of 40: the 6 new ones appended (the last 6), and interleaved (6 spread among the others).
Targets: exact identical to fresh and paying no more interleaved than appended; approximate at most
30% of a fresh run's calls.

Placement from the replies (`adaptive_placement`) is off: it reads the server's prefix cache, whose
state depends on what was sent before, so with it on two fresh runs over one corpus need not send the
same requests either.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import TASK, corpus, start_server  # noqa: E402


def run_once(docs: list[tuple[str, str]], base_url: str, out: Path, cache: Path | None, mode: str,
             budget: int) -> dict[str, Any]:
    import r3con
    from r3con.pipeline.method import run

    settings = r3con.Settings.resolve(
        env={}, base_url=base_url, api_key="bench", out_dir=out, cache=cache is not None, cache_path=cache,
        notes_budget_tokens=budget, rounds=2, concurrency=16, context_window=32_768, max_steps=4,
        sandbox_timeout_s=120, adaptive_placement=False, reuse=mode, log_calls="meta",
    )
    result = asyncio.run(run(TASK, r3con.documents_from_texts(docs, stable=True), settings))
    folder = result.run_dir
    notes = [p.read_bytes() for p in sorted((folder / "notes").glob("round-*.json"))]
    finals = {e["doc"]: e["note"] for e in json.loads((folder / "notes" / "round-2.json").read_text())}
    reuse = result.reuse or {}
    return {
        "calls": result.usage.calls, "prompt_tokens": result.usage.prompt_tokens,
        "cache_hits": result.usage.cache_hits, "reused_calls": reuse.get("calls_reused", 0),
        "counts": reuse.get("counts", {}), "why": reuse.get("why", {}),
        "notes": notes, "finals": finals, "records": (folder / "records.json").read_bytes()
        if (folder / "records.json").exists() else b"",
        "answer": (folder / "answer.txt").read_bytes(),
    }


def interleave(base: list[tuple[str, str]], extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`base` with `extra` spread among its documents (each after an even share of them)."""
    out = list(base)
    for j, doc in reversed(list(enumerate(extra))):
        out.insert((j + 1) * len(base) // (len(extra) + 1), doc)
    return out


def steps(base: list[tuple[str, str]], extra: list[tuple[str, str]]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The corpus after each change: +10% documents interleaved, then one changed, then 10 deleted."""
    grown = interleave(base, extra)
    changed = list(grown)
    middle = len(changed) // 2
    title, text = changed[middle]
    cut = len(text) // 2
    changed[middle] = (title, text[:cut] + " A later hand added that the ship reached Whitby in a storm. " + text[cut:])
    gap = len(changed) // 10
    deleted = [d for i, d in enumerate(changed) if not (i % gap == gap // 2 and i // gap < 10)]
    return [("+10% interleaved", grown), ("1 changed", changed), ("10 deleted", deleted)]


def fork(chains: dict[str, Path]) -> None:
    """Every chain starts from the exact chain's record and cache (the same first run)."""
    for path in chains.values():
        if path != chains["exact"]:
            for suffix in ("", ".reuse"):
                source = chains["exact"].with_name(f"{chains['exact'].stem}{suffix}.sqlite")
                path.with_name(f"{path.stem}{suffix}.sqlite").write_bytes(source.read_bytes())


def compare(step: str, docs: list[tuple[str, str]], base_url: str, root: Path, chains: dict[str, Path],
            budget: int, index: int) -> list[dict[str, Any]]:
    """A fresh run over `docs`, then each chain's next run: calls against the fresh run's, and fidelity."""
    fresh = run_once(docs, base_url, root / "runs", None, "off", budget)
    rows: list[dict[str, Any]] = [{"step": f"{step} (D = {len(docs)})", "mode": "fresh", "calls": fresh["calls"],
                                   "prompt_tokens": fresh["prompt_tokens"]}]
    for mode, cache in chains.items():
        got = run_once(docs, base_url, root / "runs", cache, mode, budget)
        differ = sum(1 for k, v in fresh["finals"].items() if got["finals"].get(k) != v)
        differ += sum(1 for k in got["finals"] if k not in fresh["finals"])
        rows.append({
            "step": f"{step} (D = {len(docs)})", "mode": mode, "calls": got["calls"],
            "prompt_tokens": got["prompt_tokens"],
            "calls_share": round(got["calls"] / max(1, fresh["calls"]), 4),
            "tokens_share": round(got["prompt_tokens"] / max(1, fresh["prompt_tokens"]), 4),
            "reused_calls": got["reused_calls"], "cache_hits": got["cache_hits"],
            "identical": got["notes"] == fresh["notes"] and got["records"] == fresh["records"]
            and got["answer"] == fresh["answer"],
            "final_notes_differ": differ, "finals": len(fresh["finals"]),
            "answer_differs": got["answer"] != fresh["answer"],
            "reused": {s: c["reused"] for s, c in got["counts"].items()}, "why": got["why"], "index": index,
        })
    return rows


def dracula(base_url: str, root: Path) -> list[dict[str, Any]]:
    """Dracula 40 -> 46, every note shown: the 6 new documents appended, and interleaved."""
    everything = corpus(46, 0)
    spread = {3, 11, 19, 27, 35, 43}
    branches = [("+6 appended", everything[:40], everything, 0),
                ("+6 interleaved", [d for i, d in enumerate(everything) if i not in spread], everything, 1)]
    rows: list[dict[str, Any]] = []
    for step, base, grown, index in branches:
        chains = {"exact": root / f"{index}-exact.sqlite", "approximate": root / f"{index}-approximate.sqlite"}
        first = run_once(base, base_url, root / "runs", chains["exact"], "exact", 0)
        fork(chains)
        rows.append({"step": f"D = {len(base)}", "mode": "first run", "calls": first["calls"],
                     "prompt_tokens": first["prompt_tokens"]})
        rows += compare(step, grown, base_url, root, chains, 0, index)
    return rows


def targets(rows: list[dict[str, Any]], is_dracula: bool) -> list[tuple[str, bool]]:
    out = []
    exact = {r["index"]: r for r in rows if r["mode"] == "exact"}
    approximate = {r["index"]: r for r in rows if r["mode"] == "approximate"}
    for r in exact.values():
        out.append((f"exact identical to fresh, {r['step']}", r["identical"]))
    if is_dracula:
        out.append(("exact pays no more interleaved than appended", exact[1]["calls"] <= exact[0]["calls"]))
        out += [(f"approximate <= 30% of fresh calls, {r['step']}", r["calls_share"] <= 0.30)
                for r in approximate.values()]
    else:
        out.append(("exact <= 20% of fresh calls, +10% interleaved", exact[0]["calls_share"] <= 0.20))
        out.append(("exact <= 20% of fresh calls, 10 deleted", exact[2]["calls_share"] <= 0.20))
        out.append(("approximate <= 15% of fresh calls, +10% interleaved", approximate[0]["calls_share"] <= 0.15))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--chars", type=int, default=3000)
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--dracula", action="store_true", help="Dracula 40 -> 46, every note shown")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    server, base_url = start_server()
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            if args.dracula:
                rows = dracula(base_url, root)
            else:
                everything = corpus(args.docs + args.docs // 10, args.chars)
                base, extra = everything[: args.docs], everything[args.docs:]
                chains = {"exact": root / "exact.sqlite", "approximate": root / "approximate.sqlite"}
                first = run_once(base, base_url, root / "runs", chains["exact"], "exact", args.budget)
                fork(chains)
                rows.append({"step": f"D = {len(base)}", "mode": "first run", "calls": first["calls"],
                             "prompt_tokens": first["prompt_tokens"]})
                for i, (step, docs) in enumerate(steps(base, extra)):
                    rows += compare(step, docs, base_url, root, chains, args.budget, i)
    finally:
        server.terminate()
        server.wait(timeout=10)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| step | mode | calls | share of fresh | prompt tokens | share | reused calls | cache hits | "
          "identical to fresh | final notes differing | answer differs | parts reused per stage |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|")
    for r in rows:
        share = f"{100 * r['calls_share']:.1f}%" if "calls_share" in r else ""
        tshare = f"{100 * r['tokens_share']:.1f}%" if "tokens_share" in r else ""
        reused = ", ".join(f"{s} {n}" for s, n in sorted(r.get("reused", {}).items()))
        differ = f"{r['final_notes_differ']} of {r['finals']}" if "finals" in r else ""
        print(f"| {r['step']} | {r['mode']} | {r['calls']:,} | {share} | {r['prompt_tokens']:,} | {tshare} | "
              f"{r.get('reused_calls', '')} | {r.get('cache_hits', '')} | {r.get('identical', '')} | "
              f"{differ} | {r.get('answer_differs', '')} | {reused} |")
    for name, ok in targets(rows, args.dracula):
        print(f"{'PASS' if ok else 'FAIL'}: {name}")
    for r in rows:
        if r.get("why"):
            print(f"why, {r['step']}, {r['mode']}: {json.dumps(r['why'])}")


if __name__ == "__main__":
    main()
