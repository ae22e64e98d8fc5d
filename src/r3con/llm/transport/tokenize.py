"""Token counts from the endpoint's own tokenizer (POST /tokenize), and the choice among the counters."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from ...errors import ProviderError
from ...tokens import ESTIMATE_RULE, EstimateCounter, FileCounter, TokenCounter, estimate_tokens
from .endpoint import Account, Endpoint, HTTPFailure

TRIES = 3  # tries of one text before the endpoint is taken to have no /tokenize


class EndpointCounter:
    """POST {server}/tokenize (vLLM and SGLang read `prompt`, llama.cpp `content`: both are sent), through the
    one HTTP transport; falls back to the estimate when the server has none."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, concurrency: int = 8):
        self._endpoint = Endpoint(base_url, Account(api_key), timeout_s=60)
        self._model = model
        self._limit = asyncio.Semaphore(concurrency)
        self._missing = False
        self.source = f"{self._endpoint.root}/tokenize"

    async def aclose(self) -> None:
        await self._endpoint.aclose()

    async def count(self, texts: Sequence[str]) -> list[int]:
        return list(await asyncio.gather(*(self._one(t) for t in texts)))

    async def _one(self, text: str) -> int:
        if self._missing or not text:
            return estimate_tokens(text)
        async with self._limit:
            for attempt in range(TRIES):
                try:
                    data = await self._endpoint.post("//tokenize", {"model": self._model, "prompt": text,
                                                                   "content": text, "add_special_tokens": False})
                    break
                except (HTTPFailure, ProviderError) as exc:
                    # a server that has none says so (404, 405, 501); one busy or loading may answer the next try
                    if getattr(exc, "status", None) in (404, 405, 501) or attempt == TRIES - 1 or self._missing:
                        self._missing = True
                        self.source = f"estimate ({ESTIMATE_RULE}; the endpoint has no /tokenize)"
                        return estimate_tokens(text)
                    await asyncio.sleep(0.5 * (attempt + 1))
        if isinstance(data, dict):
            if isinstance(data.get("count"), int):
                return int(data["count"])
            if isinstance(data.get("tokens"), list):
                return len(data["tokens"])
        return estimate_tokens(text)


def make_counter(*, tokenizer_file: Path | None = None, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None) -> TokenCounter:
    """A local tokenizer file if given, else the endpoint's /tokenize if a base URL and model are given, else the estimate."""
    if tokenizer_file is not None:
        return FileCounter(tokenizer_file)
    if base_url and model:
        return EndpointCounter(base_url, model, api_key)
    return EstimateCounter()
