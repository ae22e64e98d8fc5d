"""The value check's mutation battery on real text: genuine passages of Dracula and of the Loong benchmark's
English and Chinese financial reports, altered as copying models alter them, each verified against its
whole document (`r3con.evidence.citations.verify`). Prints the confusion table of docs/evidence.md, per corpus with
--by-corpus, and the first cases that missed their target.

    python bench/evidence_battery.py [--data ../shared/data] [--per-kind 150] [--seed 11] [--by-corpus] [--show 20]

The alterations are in tests/mutations.py (tests/test_evidence_battery.py runs a smaller battery).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.mutations import corpora, run, table  # noqa: E402

from r3con.evidence.citations import VERIFIED  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--per-kind", type=int, default=150, help="cases of each alteration in each corpus, at most")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--by-corpus", action="store_true")
    parser.add_argument("--show", type=int, default=20, help="cases that missed their target to print")
    args = parser.parse_args()
    started = time.perf_counter()
    cases = list(run(corpora(args.data), per_kind=args.per_kind, seed=args.seed))
    elapsed = time.perf_counter() - started
    print(table(cases))
    if args.by_corpus:
        for name in dict.fromkeys(c.corpus for c in cases):
            print(f"\n{name}\n")
            print(table([c for c in cases if c.corpus == name]))
    docs = {(c.corpus, c.doc) for c in cases}
    print(f"\n{len(cases)} cases from {len(docs)} documents in {elapsed:.0f} s (seed {args.seed})")
    missed = [c for c in cases if (c.group == "changes") == (c.outcome in VERIFIED) and c.group != "reorders"]
    for c in missed[:args.show]:
        print(f"\n{c.kind} ({c.corpus}, {c.doc}): {c.outcome} {list(c.differences)}\n  document: {c.passage[:200]}\n"
              f"  altered:  {c.altered[:200]}")


if __name__ == "__main__":
    main()
