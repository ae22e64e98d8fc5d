"""What looking for a local server costs, and what writing the records as tables costs.

    .venv/bin/python bench/bench_local.py [--repeats 20] [--records 1000,10000] [--json]

1. `find_servers` over five ports nothing listens on (free ports, never the usual ones), and over the
   same five with a stand-in Ollama on one of them: median and p90 in milliseconds.
2. `write_tables` (Parquet per record type and records.duckdb) for N records: median seconds, and the
   ratio to writing the same records as CSV the way the run folder does.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import socket
import statistics
import tempfile
import time
from pathlib import Path

from r3con.artifacts.tables import write_tables
from r3con.llm.discovery.local import find_servers
from r3con.testing import OllamaServer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def summary(seconds: list[float], scale: float = 1000.0) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"median": round(statistics.median(ordered) * scale, 3),
            "p90": round(ordered[int(0.9 * (len(ordered) - 1))] * scale, 3)}


def records(n: int) -> list[dict[str, object]]:
    return [{"name": f"Supplier {i}", "amount": i * 12.5, "city": "Rotterdam", "_id": f"R{i}.1.1", "_doc": i,
             "_title": f"Document {i}", "_passage": f"Supplier {i} delivered goods worth {i * 12.5} EUR.",
             "_span": [10, 60], "_match": "exact" if i % 10 else "none"} for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--records", default="1000,10000")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result: dict[str, object] = {}
    closed = [(free_port(), name) for name in ("Ollama", "llama.cpp", "vLLM", "SGLang", "LM Studio")]
    result["find_nothing_ms"] = summary(timed(lambda: asyncio.run(find_servers(closed)), args.repeats))
    with OllamaServer(models=("llama3.2:latest", "qwen3:8b"), running={"llama3.2:latest": 8192}) as server:
        ports = [(server.port, "Ollama"), *closed[1:]]
        result["find_ollama_ms"] = summary(timed(lambda: asyncio.run(find_servers(ports)), args.repeats))
    for n in (int(x) for x in args.records.split(",")):
        rows = records(n)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            tables = timed(lambda rows=rows, folder=folder: write_tables(folder, {"suppliers": rows}), 5)

            def as_csv(rows=rows, folder=folder) -> None:
                with (folder / "suppliers.csv").open("w", newline="") as fh:
                    writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
                    writer.writeheader()
                    writer.writerows(rows)

            plain = timed(as_csv, 5)
        result[f"write_tables_{n}_s"] = {**summary(tables, 1.0),
                                         "ratio_to_csv": round(statistics.median(tables) / statistics.median(plain), 1)}
    if args.json:
        print(json.dumps(result))
        return
    for name, value in result.items():
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
