from collections.abc import AsyncIterator

import pytest

from ..otlp import Receiver, receiving

pytest.importorskip("opentelemetry.sdk", reason="tracing's tests need pip install 'r3con[otel]'")


@pytest.fixture
async def receiver(monkeypatch) -> AsyncIterator[Receiver]:
    """The receiver, running in the test's loop; the OTLP exporter pointed at it by the standard variables."""
    async with receiving() as got:
        for name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
                     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "R3CON_OTEL_CONTENT"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", got.url)
        yield got
