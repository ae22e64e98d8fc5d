"""The embeddings seam: `embed(texts) -> vectors` over an OpenAI-compatible `/v1/embeddings` endpoint.

Off unless a model is configured (`--embedding-model`, env R3CON_EMBEDDING_MODEL); methods that can
use dense retrieval fall back to BM25 without it. Calls are batched, carry the caller's
`X-R3con-Stage`, are logged to the run's calls.jsonl and counted in its ledger (prompt tokens).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Protocol

import openai

from ..config import Settings
from ..errors import ConfigError, ProviderError
from .layers import CallLog, Ledger
from .pricing import PriceTable
from .types import Usage


class Embedder(Protocol):
    """Turns texts into vectors, one per text, in order."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class OpenAIEmbeddings:
    """Embeds through `client.embeddings.create`, `batch_size` texts a request."""

    def __init__(self, settings: Settings, model: str, *, stage: str, ledger: Ledger | None = None,
                 log: CallLog | None = None, batch_size: int = 64):
        self.base_url = settings.require_endpoint().rstrip("/")
        self.model = model
        self.stage = stage
        self.batch_size = batch_size
        self._ledger = ledger
        self._log = log or CallLog(None)
        self._prices = PriceTable.load(settings.prices_file)
        self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=settings.api_key or "EMPTY",
                                          max_retries=2, timeout=settings.request_timeout_s)

    async def aclose(self) -> None:
        await self._client.close()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(await self._batch(list(texts[start:start + self.batch_size])))
        return out

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        started = time.time()
        record = {"time": started, "stage": self.stage, "kind": "embeddings", "model": self.model, "inputs": len(texts)}
        try:
            response = await self._client.embeddings.create(
                model=self.model, input=[t if t.strip() else " " for t in texts],
                extra_headers={"X-R3con-Stage": self.stage},
            )
        except openai.APIConnectionError as exc:
            self._log.write({**record, "error": f"connection failed: {exc}"})
            raise ProviderError(f"{self.base_url}: embeddings request failed ({exc})", endpoint=self.base_url) from exc
        except openai.AuthenticationError as exc:
            raise ConfigError(f"{self.base_url} refused the API key; set OPENAI_API_KEY or pass --api-key") from exc
        except openai.NotFoundError as exc:
            raise ConfigError(
                f"{self.base_url} has no embeddings model {self.model!r} (HTTP 404); "
                "set R3CON_EMBEDDING_MODEL to a served one, or unset it to use BM25 only"
            ) from exc
        except openai.APIStatusError as exc:
            self._log.write({**record, "error": f"HTTP {exc.status_code}"})
            raise ProviderError(f"{self.base_url} answered HTTP {exc.status_code} to an embeddings request",
                                status=exc.status_code, endpoint=self.base_url) from exc
        vectors = [list(item.embedding) for item in sorted(response.data, key=lambda d: d.index)]
        if len(vectors) != len(texts):
            raise ProviderError(f"{self.base_url} returned {len(vectors)} embeddings for {len(texts)} texts",
                                endpoint=self.base_url)
        tokens = int(getattr(response.usage, "prompt_tokens", 0) or 0)
        usage = Usage(calls=1, prompt_tokens=tokens)
        usage = Usage(calls=1, prompt_tokens=tokens, cost_usd=self._prices.cost(self.model, usage))
        if self._ledger is not None:
            self._ledger.add(self.stage, usage)
        self._log.write({**record, "usage": usage.to_dict(), "latency_s": round(time.time() - started, 4)})
        return vectors


@asynccontextmanager
async def open_embedder(settings: Settings, *, stage: str, ledger: Ledger | None = None,
                        log: CallLog | None = None) -> AsyncIterator[Embedder | None]:
    """The configured embedder, or None when no embedding model is configured."""
    model = settings.embedding_model
    if not model:
        yield None
        return
    embedder = OpenAIEmbeddings(settings, model, stage=stage, ledger=ledger, log=log)
    try:
        yield embedder
    finally:
        await embedder.aclose()
