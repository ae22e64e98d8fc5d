from collections.abc import AsyncIterator

import pytest

pytest.importorskip("opentelemetry.sdk", reason="tracing's tests need pip install 'r3con[otel]'")


class Receiver:
    """A small OTLP/HTTP receiver on 127.0.0.1: what was POSTed to /v1/traces, decoded as the protocol's protobuf."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.url = ""

    def spans(self) -> list:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        out = []
        for body in self.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    out.extend(scope.spans)
        return out

    def resources(self) -> list[dict]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        out = []
        for body in self.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            out.extend(attributes(r.resource) for r in request.resource_spans)
        return out


def attributes(message) -> dict:
    """A span's (or resource's, or span event's) attributes as plain Python values."""
    out = {}
    for kv in message.attributes:
        which = kv.value.WhichOneof("value")
        value = getattr(kv.value, which)
        if which == "array_value":
            value = [getattr(v, v.WhichOneof("value")) for v in value.values]
        out[kv.key] = value
    return out


@pytest.fixture
async def receiver(monkeypatch) -> AsyncIterator[Receiver]:
    """The receiver, running in the test's loop; the OTLP exporter pointed at it by the standard variables."""
    from aiohttp import web

    got = Receiver()

    async def traces(request: web.Request) -> web.Response:
        got.bodies.append(await request.read())
        return web.Response(content_type="application/x-protobuf", body=b"")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    got.url = f"http://127.0.0.1:{port}"
    for name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
                 "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "R3CON_OTEL_CONTENT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", got.url)
    try:
        yield got
    finally:
        await runner.cleanup()
