"""A run's events (as `Event.to_dict()` gives them) made spans: the run, its stages, its LLM calls.

Every span takes its times from the events (a call's from its `started` and `time`), not from when this code
sees them, so a trace drawn from a replayed event stream is the run as it happened."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .._version import __version__

# The GenAI semantic conventions these spans follow (gen_ai.provider.name, not the older gen_ai.system)
SEMCONV = "1.37.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV}"

# gen_ai.provider.name's well-known values, by the API's host; any other OpenAI-compatible server (llama.cpp,
# vLLM, a proxy) is named for what it speaks, as the conventions allow a value of one's own
PROVIDERS = {"api.openai.com": "openai", "api.anthropic.com": "anthropic", "api.deepseek.com": "deepseek",
             "api.groq.com": "groq", "api.mistral.ai": "mistral_ai", "api.x.ai": "x_ai",
             "api.perplexity.ai": "perplexity", "generativelanguage.googleapis.com": "gcp.gemini"}
OPENAI_COMPATIBLE = "openai_compatible"


def _ns(seconds: Any) -> int | None:
    return int(float(seconds) * 1e9) if isinstance(seconds, int | float) and seconds > 0 else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _scalars(prefix: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers and strings of `values` as attributes named `prefix.key` (nested and empty ones left out)."""
    return {f"{prefix}.{k}": v for k, v in values.items() if isinstance(v, str | int | float | bool)}


class RunTracer:
    """The spans of one run, made as its events come (`on`); `flush` exports what was made."""

    def __init__(self, tracer: trace.Tracer, provider: Any, own: bool, content: bool):
        self._tracer, self._provider, self._own, self.content = tracer, provider, own, content
        self._run: Span | None = None
        self._stages: dict[str, Span] = {}
        self._server: tuple[str, str, int | None] | None = None  # provider name, host, port

    @classmethod
    def open(cls, *, content: bool = False, provider: Any = None) -> RunTracer:
        """A tracer on `provider`, else the process's global provider if one was set, else one of its own that
        exports OTLP over HTTP as the `OTEL_*` variables configure it."""
        own = False
        if provider is None:
            provider = trace.get_tracer_provider()
            if not isinstance(provider, TracerProvider):  # the API's proxy: nobody configured OpenTelemetry
                provider, own = _own_provider(), True
        tracer = provider.get_tracer("r3con", __version__, schema_url=SCHEMA_URL)
        return cls(tracer, provider, own, content)

    def on(self, event: Mapping[str, Any]) -> None:
        """Make or end the spans `event` says (one of `r3con.events`' kinds, as a dict)."""
        kind = event.get("kind")
        if kind == "started":
            self._started(event)
        elif kind == "stage":
            self._stage(event)
        elif kind == "call":
            self._call(event)
        elif kind in ("finished", "failed", "cancelled"):
            self._ended(event)
        elif kind in ("warning", "fallback", "degraded", "records", "replanned", "note"):
            self._mark(event)

    def close_open(self, at: float | None = None) -> None:
        """End every span still open (a run whose stream stopped without its final event)."""
        end = _ns(at)
        for span in self._stages.values():
            span.end(end_time=end)
        self._stages.clear()
        if self._run is not None:
            self._run.end(end_time=end)
            self._run = None

    def flush(self) -> None:
        """Export what was made; a provider made here is shut down (its exporter's connections closed)."""
        if self._own:
            self._provider.shutdown()
        elif hasattr(self._provider, "force_flush"):
            self._provider.force_flush()

    def _started(self, event: Mapping[str, Any]) -> None:
        plan = _mapping(event.get("plan"))
        endpoint = _mapping(plan.get("endpoint"))
        self._server = _server(endpoint.get("base_url"))
        attributes: dict[str, Any] = {
            "r3con.run_dir": str(event.get("run_dir") or ""), "r3con.resumed": bool(event.get("resumed")),
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "r3con",
            **_scalars("r3con.plan", {k: plan.get(k) for k in ("documents", "parts", "part_tokens", "model")}),
            **_scalars("r3con.plan.total", _mapping(plan.get("total"))),
        }
        if self.content:
            attributes["r3con.question"] = str(event.get("question") or "")
        self._run = self._tracer.start_span("invoke_agent r3con", kind=SpanKind.INTERNAL, attributes=attributes,
                                            start_time=_ns(event.get("time")))

    def _stage(self, event: Mapping[str, Any]) -> None:
        stage = str(event.get("stage") or "")
        if event.get("state") == "started":
            open_before = self._stages.pop(stage, None)
            if open_before is not None:  # a stage begun again (a relevance round re-planned) ends the one before
                open_before.end(end_time=_ns(event.get("time")))
            self._stages[stage] = self._tracer.start_span(
                f"r3con {stage}", context=self._in(self._run), start_time=_ns(event.get("time")),
                attributes={"r3con.stage": stage, "r3con.stage.total": int(event.get("total") or 0)})
        else:
            span = self._stages.pop(stage, None)
            if span is not None:
                span.end(end_time=_ns(event.get("time")))

    def _call(self, event: Mapping[str, Any]) -> None:
        stage = str(event.get("stage") or "")
        model = str(event.get("model") or "")
        provider, host, port = self._server or (OPENAI_COMPATIBLE, "", None)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
            "gen_ai.request.model": model, "gen_ai.response.model": model,
            "gen_ai.usage.input_tokens": int(event.get("prompt_tokens") or 0),
            "gen_ai.usage.output_tokens": int(event.get("completion_tokens") or 0),
            "gen_ai.usage.cache_read.input_tokens": int(event.get("cached_tokens") or 0),
            "r3con.stage": stage, "r3con.source": str(event.get("source") or ""),
            "r3con.latency_s": float(event.get("latency_s") or 0.0),
        }
        if event.get("finish_reason"):
            attributes["gen_ai.response.finish_reasons"] = [str(event["finish_reason"])]
        if host:
            attributes["server.address"] = host
            if port is not None:
                attributes["server.port"] = port
        for key, name in (("doc", "r3con.document"), ("part", "r3con.part"), ("round", "r3con.round"),
                          ("cost_usd", "r3con.cost_usd"), ("retries", "r3con.retries")):
            if event.get(key) is not None:
                attributes[name] = event[key]
        end = _ns(event.get("time"))
        start = _ns(event.get("started")) or (end - int(float(event.get("latency_s") or 0) * 1e9) if end else None)
        parent = self._stages.get(stage, self._run)
        span = self._tracer.start_span(f"chat {model}".strip(), context=self._in(parent), kind=SpanKind.CLIENT,
                                       attributes=attributes, start_time=start)
        if event.get("error"):
            span.set_attribute("error.type", str(event["error"]).split(":", 1)[0])
            span.set_status(Status(StatusCode.ERROR, str(event["error"])))
        span.end(end_time=end)

    def _mark(self, event: Mapping[str, Any]) -> None:
        """A thing the run noticed, as an event on its stage's span (or the run's)."""
        kind = str(event["kind"])
        if kind == "note" and not self.content:
            return  # a note is what the model read in a document: content
        values = {k: v for k, v in event.items() if k not in ("kind", "time")}
        if kind == "note":
            values["text"] = str(values.get("text") or "")
        stage = str(event.get("stage") or {"note": "relevance", "records": "populate"}.get(kind, ""))
        span = self._stages.get(stage, self._run)
        if span is not None:
            span.add_event(f"r3con.{kind}", attributes=_scalars(f"r3con.{kind}", values),
                           timestamp=_ns(event.get("time")))

    def _ended(self, event: Mapping[str, Any]) -> None:
        run = self._run
        if run is None:
            return
        kind = str(event["kind"])
        run.set_attribute("r3con.status", kind)
        usage = _mapping(event.get("usage"))
        run.set_attributes(_scalars("r3con.usage", usage))
        for name, key in (("gen_ai.usage.input_tokens", "prompt_tokens"), ("gen_ai.usage.output_tokens",
                                                                          "completion_tokens")):
            if isinstance(usage.get(key), int):
                run.set_attribute(name, usage[key])
        if kind == "failed":
            run.set_attribute("error.type", "r3con.failed")
            run.set_status(Status(StatusCode.ERROR, str(event.get("error") or "")))
        elif kind == "finished":
            run.set_status(Status(StatusCode.OK))
            if self.content:
                run.set_attribute("r3con.answer", str(event.get("answer") or ""))
        self.close_open(event.get("time"))

    @staticmethod
    def _in(span: Span | None) -> Any:
        return trace.set_span_in_context(span) if span is not None else None


def _server(base_url: Any) -> tuple[str, str, int | None] | None:
    """The provider's name, host and port of the endpoint (`base_url`), or None without one."""
    if not isinstance(base_url, str) or not base_url:
        return None
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return None
    return PROVIDERS.get(host, OPENAI_COMPATIBLE), host, port


def _own_provider() -> TracerProvider:
    """A provider exporting OTLP/HTTP as `OTEL_EXPORTER_OTLP_*` say; `service.name` r3con unless set."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    attributes = {} if named else {"service.name": "r3con"}
    provider = TracerProvider(resource=Resource.create({"service.version": __version__, **attributes}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider
