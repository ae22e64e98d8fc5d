"""A small OTLP/HTTP receiver on 127.0.0.1 for the tests that check what r3con exports: what was POSTed to
/v1/traces, decoded as the protocol's protobuf. The OpenTelemetry packages are imported where they are used, so
that importing this module costs nothing where the `otel` extra is not installed."""

import contextlib
from collections.abc import AsyncIterator


class Receiver:
    """What the receiver was sent, and its address."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.url = ""

    def _requests(self) -> list:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        out = []
        for body in self.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            out.append(request)
        return out

    def spans(self) -> list:
        return [span for request in self._requests() for resource in request.resource_spans
                for scope in resource.scope_spans for span in scope.spans]

    def resources(self) -> list[dict]:
        return [attributes(r.resource) for request in self._requests() for r in request.resource_spans]


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


@contextlib.asynccontextmanager
async def receiving() -> AsyncIterator[Receiver]:
    """A receiver running in the caller's loop until the block ends."""
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
    try:
        yield got
    finally:
        await runner.cleanup()
