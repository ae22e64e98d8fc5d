"""Are invented passages caught, and genuine ones never flagged? Dracula over the scripted server.

The server invents a share of records' passages (`invent`: the document's words in a new order, or a
sentence of another document's note) and copies a share of the others carelessly (`reword`: white space,
quotes, dashes, case, or one word changed), and logs which. Population runs with `--unverified keep`, so
every record the server gave is in the result; each is compared with the server's log.

    python bench/bench_evidence.py [--data ../shared/data] [--seeds 1 2 3] [--rates 0.1 0.3 0.5] [--reword 0.3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import r3con
from r3con.evidence.citations import fuzzy_score
from r3con.pipeline.method import run
from r3con.testing import FakeLLMServer, FaultPlan


async def measure(data: Path, invent: float, reword: float, seed: int, unverified: str = "keep") -> dict[str, object]:
    question = json.loads((data / "dracula" / "questions.json").read_text())[0]["question"]
    docs = r3con.load_documents([data / "dracula" / "docs"])
    with tempfile.TemporaryDirectory() as out, FakeLLMServer(faults=FaultPlan(invent=invent, reword=reword, seed=seed)) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=Path(out),
                                          unverified=unverified, cache=False)
        started = time.perf_counter()
        result = await run(question, docs, settings)
        elapsed = time.perf_counter() - started
        calls = [c for c in server.calls() if c["stage"] == "populate" and c.get("status") == 200]
    key = {"invented": set(), "reworded": set()}
    for c in calls:
        for kind in key:
            key[kind] |= {(int(c["doc"]), int(c.get("part") or 1), p) for p in c.get(kind, [])}
    records = [r for rows in result.records.values() for r in rows]
    parts = {(p.number, p.part): p.text for p in result.parts}

    def of(r: dict) -> tuple[int, int, str]:
        return (r["_doc"], r.get("_part", 1), r["_passage"])

    invented = [r for r in records if of(r) in key["invented"]]
    reworded = [r for r in records if of(r) in key["reworded"]]
    genuine = [r for r in records if of(r) not in key["invented"]]
    scores = [fuzzy_score(r["_passage"], parts[(r["_doc"], r.get("_part", 1))]) for r in invented]
    flagged = ("none", "mismatch")  # a mismatch is flagged too; a careless copy that changed a name is one rightly
    return {
        "invent": invent, "reword": reword, "seed": seed, "records": len(records), "invented": len(invented),
        "invented_flagged": sum(r["_match"] in flagged for r in invented),
        "genuine": len(genuine),
        "false_flags": sum(r["_match"] in flagged and not (r in reworded and r["_match"] == "mismatch") for r in genuine),
        "reworded": len(reworded), "reworded_by": {k: sum(r["_match"] == k for r in reworded)
                                                    for k in ("exact", "tolerant", "fuzzy", "mismatch", "none")},
        "invented_max_score": round(max(scores), 1) if scores else None,
        "share_verified": result.evidence_stats.share if result.evidence_stats else None,
        "seconds": round(elapsed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.1, 0.3, 0.5])
    parser.add_argument("--reword", type=float, default=0.3)
    args = parser.parse_args()
    rows = [asyncio.run(measure(args.data, rate, args.reword, seed)) for rate in args.rates for seed in args.seeds]
    for row in rows:
        print(json.dumps(row))
    total = {k: sum(int(r[k]) for r in rows) for k in ("records", "invented", "invented_flagged", "genuine",
                                                       "false_flags", "reworded")}
    print(json.dumps({"total": total, "invented_max_score": max((r["invented_max_score"] or 0) for r in rows)}))


if __name__ == "__main__":
    main()
