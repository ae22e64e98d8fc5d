"""What tracing costs a run: the time `r3con.otel` takes to make the spans of a run's events, per call event.

    .venv/bin/python bench/bench_otel.py [--calls 10000] [--reps 5]

Replays a synthetic run (one stage, CALLS call events) through `RunTracer` with the SDK's batch processor and
an exporter that drops what it is given (the network left out: that is the collector's, not r3con's), and
prints the median microseconds per call event over REPS, beside the replay's own loop without a tracer."""

from __future__ import annotations

import argparse
import statistics
import time

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from r3con.otel._spans import RunTracer


class Dropped(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


def events(calls: int) -> list[dict]:
    t0 = 1_800_000_000.0
    out = [{"kind": "started", "time": t0, "run_dir": "/r", "question": "q", "resumed": False,
            "plan": {"documents": calls, "endpoint": {"base_url": "http://127.0.0.1:8080/v1"}}},
           {"kind": "stage", "time": t0, "stage": "relevance", "state": "started", "total": calls}]
    out += [{"kind": "call", "time": t0 + i + 1, "started": t0 + i, "stage": "relevance", "doc": str(i), "part": 0,
             "round": 1, "source": "endpoint", "model": "m", "prompt_tokens": 900, "completion_tokens": 80,
             "cached_tokens": 0, "cost_usd": 0.0001, "latency_s": 1.0, "error": None, "finish_reason": "stop"}
            for i in range(calls)]
    out += [{"kind": "stage", "time": t0 + calls, "stage": "relevance", "state": "finished", "total": calls},
            {"kind": "finished", "time": t0 + calls, "answer": "a", "run_dir": "/r", "usage": {"calls": calls}}]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    stream = events(args.calls)
    traced, bare = [], []
    for _ in range(args.reps):
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropped(), max_queue_size=args.calls + 16))
        tracer = RunTracer.open(provider=provider)
        began = time.perf_counter()
        for event in stream:
            tracer.on(event)
        traced.append(time.perf_counter() - began)
        provider.shutdown()
        began = time.perf_counter()
        for event in stream:
            event.get("kind")
        bare.append(time.perf_counter() - began)
    per_call = statistics.median(traced) / args.calls * 1e6
    print(f"calls {args.calls}, reps {args.reps}")
    print(f"traced: median {statistics.median(traced) * 1e3:.1f} ms, {per_call:.1f} us per call event")
    print(f"replay alone: median {statistics.median(bare) * 1e3:.2f} ms")
    print(f"ratio traced / replay alone: {statistics.median(traced) / statistics.median(bare):.0f}")


if __name__ == "__main__":
    main()
