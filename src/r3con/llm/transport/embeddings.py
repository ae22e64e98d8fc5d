"""The embeddings seam: `embed(texts) -> vectors` over an OpenAI-compatible `/v1/embeddings` endpoint.

Off unless a model is configured (`--embedding-model`, env R3CON_EMBEDDING_MODEL); methods that can
use dense retrieval fall back to BM25 without it. Calls are batched, carry the caller's
`X-R3con-Stage`, are logged to the run's calls.jsonl and counted in its ledger (prompt tokens), and
share the run's retries and `--max-cost` cap with its chat calls.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

from ...config import Settings
from ...errors import ConfigError, ProviderError, R3conError
from ...tokens import estimate_tokens
from ..cache import CallCache
from ..layers.accounting import Ledger
from ..layers.budget import CostCap, priced
from ..layers.calllog import CallLog
from ..layers.retry import Retrier, RetryBudget, RetryPolicy
from ..pricing import PriceTable
from ..types import Completion, Usage
from .client import _count, endpoint_for, status_error
from .endpoint import HTTPFailure


class Embedder(Protocol):
    """Turns texts into vectors, one per text, in order."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class OpenAIEmbeddings:
    """Embeds through `POST /embeddings` on the one transport (`endpoint.Endpoint`), `batch_size` texts a request.

    Each request goes through the run's retry policy and budget (`retrier`) and, under `--max-cost`,
    reserves its worst case against the run's `cap` first, as chat calls do.
    """

    def __init__(self, settings: Settings, model: str, *, stage: str, ledger: Ledger | None = None,
                 log: CallLog | None = None, retrier: Retrier | None = None, cap: CostCap | None = None,
                 cache: CallCache | None = None, batch_size: int = 64):
        self.endpoint = endpoint_for(settings)
        self.base_url = self.endpoint.base_url
        self.model = model
        self.stage = stage
        self.batch_size = batch_size
        self._ledger = ledger
        self._log = log or CallLog(None)
        self._prices = PriceTable.load(settings.prices_file, base_url=self.base_url)
        self._retrier = retrier or Retrier(
            RetryPolicy(settings.retries, settings.retry_base_s, settings.retry_max_s, settings.max_call_s),
            RetryBudget(settings.retry_budget), self.base_url)
        self._cap = cap
        self._cache = cache

    async def aclose(self) -> None:
        await self.endpoint.aclose()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(await self._batch(list(texts[start:start + self.batch_size])))
        return out

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        started = time.time()
        record = {"time": started, "stage": self.stage, "kind": "embeddings", "model": self.model, "inputs": len(texts)}
        key = self._key(texts)
        hit = self._cache.get(key) if self._cache is not None else None
        if hit is not None:  # embedded before: the vectors from the cache, counted as a cache hit
            saved = hit.usage.prompt_tokens
            usage = Usage(cache_hits=1, saved_tokens=saved, saved_usd=self._prices.cost(self.model, hit.usage) or 0.0)
            if self._ledger is not None:
                self._ledger.add(self.stage, usage)
            self._log.write({**record, "usage": usage.to_dict(), "from_cache": True})
            return [list(v) for v in json.loads(hit.content)]
        worst = self._worst_case(texts)
        if self._cap is not None:
            await self._cap.acquire(worst)
        actual = 0.0
        try:
            response, retries, waits = await self._retrier.run(lambda: self._request(texts))
            usage = checked_tokens(response, texts)
            usage = self._prices.priced(self.model, usage.with_event("retries", retries).with_event("waits", waits))
            actual = usage.cost_usd
        except R3conError as exc:
            self._log.write({**record, "error": f"{type(exc).__name__}: {exc}"})
            raise
        finally:
            if self._cap is not None:
                self._cap.settle(worst, actual)
        items = sorted((d for d in response.get("data") or [] if isinstance(d, dict)), key=lambda d: d.get("index", 0))
        vectors = [list(item.get("embedding") or []) for item in items]
        if len(vectors) != len(texts):
            raise ProviderError(f"{self.base_url} returned {len(vectors)} embeddings for {len(texts)} texts",
                                endpoint=self.base_url)
        if self._ledger is not None:
            self._ledger.add(self.stage, usage)
        self._log.write({**record, "usage": usage.to_dict(), "latency_s": round(time.time() - started, 4)})
        if self._cache is not None:
            self._cache.put(key, self.base_url, self.stage, Completion(
                content=json.dumps(vectors), finish_reason="stop", usage=usage, model=self.model))
        return vectors

    def _key(self, texts: list[str]) -> str:
        """The cache key of one embeddings request: the endpoint, the model and the texts."""
        digest = hashlib.sha256(f"{self.base_url}\x00embeddings\x00{self.model}".encode())
        for text in texts:
            data = text.encode()
            digest.update(f"\x00{len(data)}\x00".encode())
            digest.update(data)
        return digest.hexdigest()

    def _worst_case(self, texts: list[str]) -> float:
        """USD the request may cost: as many tokens as a reply may claim (`most_tokens`); under --max-cost the model
        must have a price."""
        if self._cap is None:
            return 0.0
        price = priced(self._prices, self.model)
        return most_tokens(texts) * price.dearest_input / 1_000_000

    async def _request(self, texts: list[str]) -> dict[str, Any]:
        """One embeddings request; endpoint failures as ProviderError (retried when transient) or ConfigError."""
        body = {"model": self.model, "input": [t if t.strip() else " " for t in texts]}
        try:
            data = await self.endpoint.post("/embeddings", body, {"X-R3con-Stage": self.stage})
        except HTTPFailure as failure:
            if failure.status == 404:
                raise ConfigError(
                    f"{self.base_url} has no embeddings model {self.model!r} (HTTP 404); "
                    "set R3CON_EMBEDDING_MODEL to a served one, or unset it to use BM25 only") from None
            raise status_error(self.base_url, failure, self.model, "/embeddings") from None
        if not isinstance(data, dict):
            raise ProviderError(f"{self.base_url}/embeddings answered with something that is not a JSON object",
                                endpoint=self.base_url)
        return data


SPECIAL_TOKENS = 8  # tokens an embedding model may add to a text of its own (BOS, EOS, a separator)


def most_tokens(texts: Sequence[str]) -> int:
    """The most tokens an embeddings reply for `texts` may claim: a token per byte sent, and SPECIAL_TOKENS a
    text (what `--max-cost` reserves)."""
    return sum(len((t if t.strip() else " ").encode()) + SPECIAL_TOKENS for t in texts)


def checked_tokens(response: dict[str, Any], texts: Sequence[str]) -> Usage:
    """The reply's prompt tokens if they can be true (a whole number from 0 to `most_tokens`); otherwise, or when
    the reply has none, r3con's own estimate, with the event `usage_estimated` (as `client.checked_usage`)."""
    sent: dict[str, Any] = response["usage"] if isinstance(response.get("usage"), dict) else {}
    claimed = _count(sent.get("prompt_tokens"))
    if claimed is not None and claimed <= most_tokens(texts):
        return Usage(calls=1, prompt_tokens=claimed)
    return Usage(calls=1, prompt_tokens=sum(estimate_tokens(t) + 1 for t in texts), events={"usage_estimated": 1})


@asynccontextmanager
async def open_embedder(settings: Settings, *, stage: str, ledger: Ledger | None = None,
                        log: CallLog | None = None, retrier: Retrier | None = None,
                        cap: CostCap | None = None, cache: CallCache | None = None) -> AsyncIterator[Embedder | None]:
    """The configured embedder, or None when no embedding model is configured.

    A run passes its own ledger, call log, retrier and cost cap (`LLMStack.embedder` does).
    """
    model = settings.embedding_model
    if not model:
        yield None
        return
    embedder = OpenAIEmbeddings(settings, model, stage=stage, ledger=ledger, log=log, retrier=retrier, cap=cap,
                                cache=cache)
    try:
        yield embedder
    finally:
        await embedder.aclose()
