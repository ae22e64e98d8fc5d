"""`--batch`: send the calls a stage fires together through an OpenAI-compatible Batch API.

Calls of the stages whose requests are issued together (each relevance round, the population
stage) are collected until no new one came for `window_s` seconds or `max_requests` are waiting,
written as JSONL lines `{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`,
uploaded to `/v1/files` (purpose "batch") and submitted to `/v1/batches`; the layer polls the batch
and resolves each call from the output file. Batched calls are priced at the price table's batch
discount (their Completion's raw data carries `batch_id`). Other calls (the schema, the agent's
steps) go directly to the endpoint.

Every submitted batch is recorded in a state file (`batches.json` in the output folder) with the
fingerprint of each request it holds. A restarted run whose requests are already in a recorded
batch re-attaches to that batch (in progress or completed) instead of submitting them again.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ContextTooLong, ProviderError
from ...files import write_atomic
from ..layers.overflow import is_overflow
from ..types import ChatRequest, Completion
from .client import OpenAIChat, chat_body, to_completion
from .endpoint import HTTPFailure

FINAL = ("completed", "failed", "expired", "cancelled")
BATCHED_STAGES = ("relevance", "populate")  # the stages whose calls are issued together
MAX_BYTES = 180_000_000  # below the largest input file OpenAI's Batch API accepts, with room to spare


def custom_id(request: ChatRequest, n: int) -> str:
    """`stage|mode|doc|part|round|n`: unique within a batch, and readable in the provider's console."""
    fields = (request.stage, request.mode, request.doc, request.part, request.round)
    return "|".join("" if v is None else str(v) for v in fields) + f"|{n}"


class BatchState:
    """The state file: every submitted batch, and which request fingerprint each custom_id stands for."""

    def __init__(self, path: Path | None):
        self.path = path
        self._lock = threading.Lock()
        self.batches: dict[str, dict[str, Any]] = {}
        if path is not None and path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                self.batches = {b["id"]: b for b in data.get("batches", [])}
            except (OSError, ValueError, KeyError, TypeError):
                self.batches = {}  # an unreadable state file only costs a resubmission

    def find(self, fingerprint: str) -> tuple[str, str] | None:
        """(batch id, custom_id) of a recorded batch holding this request, newest batch first."""
        for batch in sorted(self.batches.values(), key=lambda b: -b.get("created", 0)):
            if batch.get("status") in ("failed", "expired", "cancelled"):
                continue
            cid = batch.get("requests", {}).get(fingerprint)
            if cid is not None:
                return batch["id"], cid
        return None

    def forget(self, batch_id: str, fingerprint: str) -> None:
        """Drop a request from a recorded batch (its answer there was an error)."""
        with self._lock:
            requests = dict(self.batches.get(batch_id, {}).get("requests", {}))
            requests.pop(fingerprint, None)
        self.record(batch_id, requests=requests)

    def record(self, batch_id: str, **changes: Any) -> None:
        with self._lock:
            entry = self.batches.setdefault(batch_id, {"id": batch_id, "created": time.time(), "requests": {}})
            entry.update(changes)
            if self.path is None:
                return
            write_atomic(self.path, json.dumps({"batches": list(self.batches.values())}, indent=1))


@dataclass
class _Pending:
    request: ChatRequest
    body: dict[str, Any]
    future: asyncio.Future[Completion]
    size: int = 0


class Batched:
    """The bottom layer under `--batch`: collects concurrent calls into Batch API jobs (module docstring)."""

    def __init__(self, base: OpenAIChat, state_path: Path | None, *, poll_s: float = 30.0, window_s: float = 0.5,
                 max_requests: int = 50_000, stages: tuple[str, ...] = BATCHED_STAGES, concurrency: int = 8):
        self.base = base
        self.stages = stages
        self._direct = asyncio.Semaphore(concurrency)
        self.endpoint = base.endpoint
        self.state = BatchState(state_path)
        self.poll_s = poll_s
        self.window_s = window_s
        self.max_requests = max_requests
        self._pending: list[_Pending] = []
        self._last_arrival = 0.0
        self._flusher: asyncio.Task[None] | None = None
        self._jobs: dict[str, asyncio.Task[dict[str, Any]]] = {}
        self._submitted = 0

    async def complete(self, request: ChatRequest) -> Completion:
        if request.stage not in self.stages:  # the schema and the agent's steps go one at a time, directly
            async with self._direct:
                return await self.base.complete(request)
        model = request.model or self.base.default_model
        if model is None:
            raise ProviderError("no model for a batched request; pass --model")
        found = self.state.find(request.fingerprint())
        if found is not None:
            batch_id, cid = found
            return await self._result(batch_id, cid, model, request)
        loop = asyncio.get_running_loop()
        body = chat_body(request, model)
        pending = _Pending(request, body, loop.create_future(), size=len(json.dumps(body)))
        self._pending.append(pending)
        self._last_arrival = loop.time()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_when_quiet())
        return await pending.future

    async def _flush_when_quiet(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            wait = self._last_arrival + self.window_s - loop.time()
            size = sum(p.size for p in self._pending)
            if wait > 0 and len(self._pending) < self.max_requests and size < MAX_BYTES:
                await asyncio.sleep(wait)
                continue
            batch, self._pending = self._pending[: self.max_requests], self._pending[self.max_requests:]
            try:
                await self._submit(batch)
            except ProviderError as exc:
                for p in batch:
                    if not p.future.done():
                        p.future.set_exception(exc)

    async def _submit(self, batch: list[_Pending]) -> None:
        lines, ids = [], {}
        for p in batch:
            self._submitted += 1
            cid = custom_id(p.request, self._submitted)
            ids[cid] = p
            lines.append(json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                                     "body": p.body}, ensure_ascii=False))
        data = ("\n".join(lines) + "\n").encode()
        try:
            uploaded = _object(await self.endpoint.upload("/files", "r3con-batch.jsonl", data, purpose="batch"))
            created = _object(await self.endpoint.post("/batches", {
                "input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}))
        except (HTTPFailure, ProviderError, KeyError) as exc:
            raise ProviderError(f"{self.base.base_url}: could not submit a batch ({_said(exc)}); "
                                "check that the endpoint offers /v1/files and /v1/batches, or drop --batch",
                                endpoint=self.base.base_url) from exc
        self.state.record(created["id"], input_file_id=uploaded["id"], status=created.get("status"),
                          requests={p.request.fingerprint(): cid for cid, p in ids.items()})
        for cid, p in ids.items():
            model = p.body["model"]
            fut = asyncio.ensure_future(self._result(created["id"], cid, model, p.request))
            fut.add_done_callback(functools.partial(_forward, target=p.future))

    async def _result(self, batch_id: str, cid: str, model: str, request: ChatRequest) -> Completion:
        task = self._jobs.get(batch_id)
        if task is None:
            task = self._jobs[batch_id] = asyncio.ensure_future(self._wait(batch_id))
        results = await asyncio.shield(task)
        line = results.get(cid)
        if line is None:
            raise ProviderError(f"batch {batch_id} has no result for {cid}", endpoint=self.base.base_url)
        response = line.get("response") or {}
        status = int(response.get("status_code") or 0)
        body = response.get("body") or {}
        if status != 200:
            self.state.forget(batch_id, request.fingerprint())  # a retry of this request goes into a new batch
            message = json.dumps(body)[:300] if body else json.dumps(line.get("error"))[:300]
            kind = ContextTooLong if status == 400 and is_overflow(message) else ProviderError
            raise kind(f"{self.base.base_url}: batch {batch_id} answered HTTP {status} for a request: {message}",
                       status=status, body=message, endpoint=self.base.base_url)
        completion = to_completion(body, model, 0.0, request)  # its usage checked against what was sent
        raw: Mapping[str, Any] = {**completion.raw, "batch_id": batch_id}
        return Completion(content=completion.content, finish_reason=completion.finish_reason, usage=completion.usage,
                          model=completion.model, reasoning=completion.reasoning, raw=raw)

    async def _wait(self, batch_id: str) -> dict[str, Any]:
        """Poll until the batch is final; its output lines by custom_id."""
        started = time.monotonic()
        while True:
            try:
                batch = _object(await self.endpoint.get(f"/batches/{batch_id}"))
            except (HTTPFailure, ProviderError) as exc:
                raise ProviderError(f"{self.base.base_url}: cannot read batch {batch_id} ({_said(exc)})",
                                    endpoint=self.base.base_url) from exc
            if batch.get("status") in FINAL:
                break
            await asyncio.sleep(self.poll_s)
        status, output_file = batch.get("status"), batch.get("output_file_id")
        self.state.record(batch_id, status=status, output_file_id=output_file,
                          waited_s=round(time.monotonic() - started, 3))
        if status != "completed" and not output_file:
            raise ProviderError(f"batch {batch_id} ended {status}: {batch.get('errors')}; rerun to submit it again",
                                endpoint=self.base.base_url)
        results: dict[str, Any] = {}
        for file_id in (batch.get("error_file_id"), output_file):
            if not file_id:
                continue
            try:
                text = await self.endpoint.text(f"/files/{file_id}/content")
            except HTTPFailure as exc:
                raise ProviderError(f"{self.base.base_url}: cannot read batch {batch_id}'s file {file_id} "
                                    f"({_said(exc)})", endpoint=self.base.base_url) from exc
            for raw_line in text.splitlines():
                if raw_line.strip():
                    item = json.loads(raw_line)
                    results[str(item.get("custom_id"))] = item
        return results


def _object(data: object) -> dict[str, Any]:
    """A Files/Batches API reply, which must be a JSON object."""
    if not isinstance(data, dict):
        raise ProviderError(f"expected a JSON object, got {str(data)[:80]!r}")
    return data


def _said(exc: Exception) -> str:
    return f"HTTP {exc.status}: {exc.message}" if isinstance(exc, HTTPFailure) else str(exc)


def _forward(source: asyncio.Future[Completion], *, target: asyncio.Future[Completion]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif source.exception() is not None:
        target.set_exception(source.exception())  # type: ignore[arg-type]
    else:
        target.set_result(source.result())
