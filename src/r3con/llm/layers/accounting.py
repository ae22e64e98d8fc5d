"""What the calls cost and how far the work got: the ledger of usage per stage, the layer that
prices each completion into it, and the layer that reports each document's progress."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ...errors import R3conError
from ..pricing import PriceTable
from ..types import LLM, ChatRequest, Completion, Usage, evolve


class Ledger:
    """Usage per stage, in tokens and USD; thread- and task-safe, observable for progress displays."""

    def __init__(self) -> None:
        self._by_stage: dict[str, Usage] = {}
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str, Usage], None]] = []

    def add(self, stage: str, usage: Usage) -> None:
        with self._lock:
            self._by_stage[stage] = self._by_stage.get(stage, Usage()) + usage
        for listener in list(self._listeners):
            listener(stage, usage)

    def subscribe(self, listener: Callable[[str, Usage], None]) -> None:
        self._listeners.append(listener)

    def by_stage(self) -> dict[str, Usage]:
        with self._lock:
            return dict(self._by_stage)

    def total(self) -> Usage:
        total = Usage()
        for usage in self.by_stage().values():
            total = total + usage
        return total


class Accounted:
    """Prices each completion and adds its usage to a ledger under its stage."""

    def __init__(self, inner: LLM, ledger: Ledger, prices: PriceTable):
        self.inner = inner
        self.ledger = ledger
        self.prices = prices

    async def complete(self, request: ChatRequest) -> Completion:
        try:
            completion = await self.inner.complete(request)
        except R3conError as exc:
            if isinstance(exc.usage, Usage):  # calls made (and billed) before the request failed for good
                self.ledger.add(request.stage, self.prices.priced(request.model or "", exc.usage))
            raise
        if completion.from_cache:
            u = completion.usage
            self.ledger.add(request.stage, Usage(cache_hits=1, saved_tokens=u.prompt_tokens + u.completion_tokens,
                                                 saved_usd=self.prices.cost(completion.model, u) or 0.0))
            return completion
        usage = self.prices.priced(completion.model, completion.usage, batch=bool(completion.raw.get("batch_id")))
        completion = evolve(completion, usage=usage)
        self.ledger.add(request.stage, usage)
        return completion


class Progressed:
    """Reports each document's progress: `advance(stage)` once per document (and round, and part), when
    the first request made for it ends, answered or failed; re-asks and retries after it count nothing."""

    def __init__(self, inner: LLM, advance: Callable[[str], None]):
        self.inner = inner
        self._advance = advance
        # the document parts done in each stage's latest round: a whole document by its number (the request's own
        # int, nothing made), a part as `doc << 32 | part`: one int each rather than a tuple, as a large run holds
        # one a document and stage; and only the latest round's set, as earlier rounds' are never asked again
        self._done: dict[str, tuple[int | None, set[int]]] = {}

    async def complete(self, request: ChatRequest) -> Completion:
        try:
            return await self.inner.complete(request)
        finally:
            if request.doc is not None:
                held = self._done.get(request.stage)
                if held is None or held[0] != request.round:  # a stage's rounds run one after the other
                    held = self._done[request.stage] = (request.round, set())
                done = held[1]
                key = request.doc if request.part is None else request.doc << 32 | request.part  # parts from 1
                if key not in done:
                    done.add(key)
                    self._advance(request.stage)
