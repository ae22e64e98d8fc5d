"""OpenTelemetry traces of a run, made from its event stream (`run.events()`): a span for the run, one for each
stage, and one for each LLM call, a child of its stage, in the GenAI semantic conventions (`_spans.SEMCONV`).

Off unless asked for: `wanted` says whether the standard environment (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, `OTEL_SDK_DISABLED` not true) or `--otel` asks, and only then does
`trace` import OpenTelemetry (the `r3con[otel]` extra). The spans carry counts, models, documents' names,
timings and costs; the question, the notes and the answer (the user's documents, in effect) only when
`R3CON_OTEL_CONTENT=1`. The exporter is OTLP over HTTP, configured by the standard `OTEL_*` variables.

    run = await r3con.start(question, paths)
    tracing = r3con.otel.trace(run)     # a task that follows the run's events and exports its spans
    result = await run.result()
    await tracing                       # the spans exported (flushed) once the run has ended
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from ._spans import RunTracer

__all__ = ["content_wanted", "follow", "require", "trace", "wanted"]

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_TRUE = ("1", "true", "yes", "on")


def wanted(env: Mapping[str, str] | None = None, flag: bool = False) -> bool:
    """Whether a run should be traced: `--otel` (`flag`), or an OTLP endpoint set in the standard environment,
    unless OpenTelemetry is switched off there (`OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return flag or any(env.get(name, "").strip() for name in _ENDPOINTS)


def content_wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether the question, notes and answer may go into spans (`R3CON_OTEL_CONTENT=1`): off by default, as
    they are the user's documents in other words."""
    env = os.environ if env is None else env
    return env.get("R3CON_OTEL_CONTENT", "").strip().lower() in _TRUE


def trace(run: Any, *, content: bool | None = None, provider: Any = None,
          env: Mapping[str, str] | None = None) -> asyncio.Task[None]:
    """Follow `run` (an `r3con.Run`) in a task of this event loop and export its spans; the task ends once the
    run has ended and its spans are flushed.

    `content`: put the question, the notes and the answer in spans (default: `R3CON_OTEL_CONTENT`).
    `provider`: an OpenTelemetry `TracerProvider` of your own (the task then flushes it but does not shut it
    down); by default the global one if the process configured one, else one made here that exports OTLP
    over HTTP as the `OTEL_*` variables say. Raises `ConfigError` when OpenTelemetry is not installed."""
    tracer = _tracer(content_wanted(env) if content is None else content, provider)
    return asyncio.ensure_future(follow(run, tracer))


async def follow(run: Any, tracer: RunTracer) -> None:
    """Feed `run`'s events to `tracer` until the final one, then flush (and close what the tracer opened)."""
    try:
        async for event in run.events():
            tracer.on(event.to_dict())
    finally:
        tracer.close_open()  # a follower stopped early still ends the spans it began
        await asyncio.to_thread(tracer.flush)


def require() -> None:
    """Raise `ConfigError`, saying what to install, unless OpenTelemetry's SDK and OTLP exporter are here: for
    a command to check as it starts, before the first run it would trace."""
    try:
        from opentelemetry.exporter.otlp.proto.http import trace_exporter  # noqa: F401

        from . import _spans  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"tracing needs OpenTelemetry ({exc.name} is not installed): pip install 'r3con[otel]'; "
                          "or leave tracing off (unset OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_SDK_DISABLED=true)") from exc


def _tracer(content: bool, provider: Any) -> RunTracer:
    require()
    from ._spans import RunTracer

    return RunTracer.open(content=content, provider=provider)
