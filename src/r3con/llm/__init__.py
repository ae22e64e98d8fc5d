"""The LLM seam: one `complete(request) -> completion` interface, and the layers stacked around it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from .client import EndpointInfo, OpenAIChat, request_headers
from .layers import Accounted, CallLog, ConcurrencyLimited, Ledger, Recorded, StageModels
from .pricing import Price, PriceTable
from .types import LLM, ChatRequest, Completion, Message, Usage

__all__ = [
    "LLM", "ChatRequest", "Completion", "EndpointInfo", "LLMStack", "Ledger", "Message", "Price",
    "PriceTable", "Usage", "build_llm", "request_headers",
]


@dataclass
class LLMStack:
    """The assembled client a run uses: call `complete`; read `ledger` and `endpoint`."""

    top: LLM
    ledger: Ledger
    endpoint: EndpointInfo

    async def complete(self, request: ChatRequest) -> Completion:
        return await self.top.complete(request)


@asynccontextmanager
async def build_llm(settings: Settings, calls_log: Path | None = None) -> AsyncIterator[LLMStack]:
    """Open the endpoint, learn its model and window, and stack the layers: log, accounting, limits."""
    base = OpenAIChat(settings)
    try:
        endpoint = await base.describe(settings)
        ledger = Ledger()
        prices = PriceTable.load(settings.prices_file)
        stack: LLM = ConcurrencyLimited(base, settings.concurrency)
        stack = Accounted(stack, ledger, prices)
        stack = Recorded(stack, CallLog(calls_log))
        stack = StageModels(stack, settings.model_for, endpoint.model)
        yield LLMStack(top=stack, ledger=ledger, endpoint=endpoint)
    finally:
        await base.aclose()
