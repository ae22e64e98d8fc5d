"""The spans made from a run's events, exported over OTLP/HTTP to a receiver in the test and decoded."""

import pytest

import r3con.otel as otel

from ..otlp import attributes

T0 = 1_800_000_000.0
SECRET = "the merger closes on 3 March"  # document text: in a note, the question, the answer


def _events() -> list[dict]:
    """A run's events as `Event.to_dict()` gives them: two stages, three calls (one from the cache, one failed)."""
    call = {"kind": "call", "model": "qwen3-4b", "cached_tokens": 0, "source": "endpoint", "error": None,
            "finish_reason": "stop"}
    return [
        {"kind": "started", "time": T0, "question": f"When does {SECRET}?", "run_dir": "/runs/x", "resumed": False,
         "plan": {"documents": 2, "parts": 2, "endpoint": {"base_url": "http://127.0.0.1:8080/v1", "model": "qwen3-4b"},
                  "total": {"calls": 3, "input_tokens": 900}}},
        {"kind": "stage", "time": T0 + 1, "stage": "relevance", "state": "started", "total": 2},
        {**call, "time": T0 + 2.5, "started": T0 + 1.5, "stage": "relevance", "doc": "a.txt", "part": 0, "round": 1,
         "prompt_tokens": 400, "completion_tokens": 50, "cost_usd": 0.001, "latency_s": 1.0},
        {**call, "time": T0 + 2.6, "started": T0 + 2.6, "stage": "relevance", "doc": "b.txt", "part": 0, "round": 1,
         "prompt_tokens": 300, "completion_tokens": 40, "cost_usd": None, "latency_s": 0.0, "source": "cache",
         "cached_tokens": 300},
        {"kind": "note", "time": T0 + 2.7, "doc": "a.txt", "round": 1, "text": SECRET},
        {"kind": "stage", "time": T0 + 3, "stage": "relevance", "state": "finished", "total": 2},
        {"kind": "stage", "time": T0 + 3, "stage": "reason", "state": "started", "total": 1},
        {**call, "time": T0 + 4, "started": T0 + 3.2, "stage": "reason", "doc": None, "part": None, "round": None,
         "prompt_tokens": 200, "completion_tokens": 0, "cost_usd": 0.0, "latency_s": 0.8, "finish_reason": None,
         "error": "ProviderError: 503 from the server"},
        {"kind": "stage", "time": T0 + 5, "stage": "reason", "state": "finished", "total": 1},
        {"kind": "finished", "time": T0 + 5, "answer": SECRET, "run_dir": "/runs/x",
         "usage": {"calls": 3, "prompt_tokens": 900, "completion_tokens": 90, "cost_usd": 0.001}},
    ]


async def _export(content: bool) -> None:
    from r3con.otel._spans import RunTracer

    class Replayed:  # a run as the tracer sees it: its events, each with to_dict()
        async def events(self):
            for event in _events():
                yield type("E", (), {"to_dict": lambda self, e=event: e})()

    await otel.follow(Replayed(), RunTracer.open(content=content))


async def test_a_span_per_call_in_the_genai_conventions_children_of_their_stages_timed_by_the_events(receiver):
    await _export(content=False)
    spans = receiver.spans()
    by_name = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (run,) = by_name["invoke_agent r3con"]
    relevance, reason = by_name["r3con relevance"][0], by_name["r3con reason"][0]
    calls = by_name["chat qwen3-4b"]
    assert len(spans) == 6 and len(calls) == 3
    assert {s.trace_id for s in spans} == {run.trace_id}
    assert relevance.parent_span_id == reason.parent_span_id == run.span_id
    assert [c.parent_span_id for c in calls] == [relevance.span_id, relevance.span_id, reason.span_id]
    first = attributes(calls[0])
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.provider.name"] == "openai_compatible"
    assert first["gen_ai.request.model"] == first["gen_ai.response.model"] == "qwen3-4b"
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (400, 50)
    assert first["gen_ai.response.finish_reasons"] == ["stop"]
    assert (first["server.address"], first["server.port"]) == ("127.0.0.1", 8080)
    assert (first["r3con.document"], first["r3con.part"], first["r3con.round"]) == ("a.txt", 0, 1)
    assert first["r3con.source"] == "endpoint" and first["r3con.cost_usd"] == pytest.approx(0.001)
    assert attributes(calls[1])["r3con.source"] == "cache" and "r3con.cost_usd" not in attributes(calls[1])
    assert sum(attributes(c)["gen_ai.usage.input_tokens"] for c in calls) == 900
    assert sum(attributes(c)["gen_ai.usage.output_tokens"] for c in calls) == 90
    # times are the run's, from the events: the first call began at its `started` and took its latency
    assert (calls[0].start_time_unix_nano, calls[0].end_time_unix_nano) == (int((T0 + 1.5) * 1e9), int((T0 + 2.5) * 1e9))
    assert (run.start_time_unix_nano, run.end_time_unix_nano) == (int(T0 * 1e9), int((T0 + 5) * 1e9))
    failed = attributes(calls[2])
    assert failed["error.type"] == "ProviderError" and calls[2].status.code == 2  # STATUS_CODE_ERROR
    assert run.status.code == 1 and attributes(run)["r3con.status"] == "finished"
    assert receiver.resources()[0]["service.name"] == "r3con"


async def test_no_question_note_or_answer_in_any_span_unless_asked_for(receiver):
    await _export(content=False)
    assert receiver.bodies and not any(SECRET.encode() in body for body in receiver.bodies)
    receiver.bodies.clear()
    await _export(content=True)
    (run,) = [s for s in receiver.spans() if s.name == "invoke_agent r3con"]
    assert attributes(run)["r3con.answer"] == SECRET and SECRET in attributes(run)["r3con.question"]
    (relevance,) = [s for s in receiver.spans() if s.name == "r3con relevance"]
    assert [attributes(e)["r3con.note.text"] for e in relevance.events if e.name == "r3con.note"] == [SECRET]


@pytest.mark.parametrize(("env", "flag", "expected"), [
    ({}, False, False), ({}, True, True), ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, False, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, True, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, False, False),
])
def test_tracing_is_on_by_the_standard_environment_or_the_flag(env, flag, expected):
    assert otel.wanted(env, flag) is expected


def test_off_imports_nothing_of_opentelemetry():
    import subprocess
    import sys

    code = ("import sys, r3con, r3con.otel; assert not r3con.otel.wanted({}); "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_without_opentelemetry_installed_tracing_says_what_to_install(monkeypatch):
    import sys

    from r3con.errors import ConfigError

    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"pip install 'r3con\[otel\]'.*OTEL_SDK_DISABLED=true"):
        otel.require()
