"""What the graph baselines' local work costs on Dracula: LinearRAG's LLM-free index, lexical vectors, PageRank.

    .venv/bin/python bench/bench_graph_baselines.py [--repeats 5] [--chunk-tokens 1000] [--json]

Times, on the Dracula corpus ($R3CON_DATA/dracula or ../shared/data/dracula) cut into chunks:
LinearRAG's index (sentences and rule-based entities of every chunk, no model), hashed TF-IDF vectors of
its entities, sentences and chunks (the fallback without --embedding-model), and one Personalized PageRank
over its passage-entity graph (igraph). Prints the median and p90 in milliseconds, and the sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from r3con.baselines import linearrag
from r3con.baselines._common import chunk_documents
from r3con.baselines._graph import lexical_vectors
from r3con.eval.dracula import load_dracula


def timed(fn, repeats: int) -> tuple[float, float, object]:
    times, out = [], fn()  # a first call to warm up (imports, caches), not timed
    for _ in range(repeats):
        started = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.9 * len(times)))], out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--chunk-tokens", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = Path(os.environ.get("R3CON_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data")
    documents = load_dracula(root / "dracula").tasks[0].documents
    chunks = chunk_documents(documents, args.chunk_tokens)
    texts = [f"{c.title}\n{c.text}" for c in chunks]
    results: dict[str, object] = {"documents": len(documents), "chunks": len(chunks)}
    med, p90, index = timed(lambda: linearrag.build_index(texts, [c.doc for c in chunks]), args.repeats)
    results["index_ms"] = [round(med, 1), round(p90, 1)]
    results.update(entities=len(index.entities), sentences=len(index.sentences))
    all_texts = [*index.entities, *index.sentences, *texts]
    med, p90, _ = timed(lambda: lexical_vectors(all_texts), args.repeats)
    results["lexical_vectors_ms"] = [round(med, 1), round(p90, 1)]
    active = {0: linearrag.Activation(1.0, 1), 1: linearrag.Activation(0.8, 2)}
    weights = np.full(len(texts), 0.01)
    med, p90, _ = timed(lambda: linearrag.rank(index, active, weights, 0.5), args.repeats)
    results["pagerank_ms"] = [round(med, 1), round(p90, 1)]
    if args.json:
        print(json.dumps(results))
        return
    for key, value in results.items():
        print(f"{key:>20}: {value}")


if __name__ == "__main__":
    main()
