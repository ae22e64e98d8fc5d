"""The scripted OpenAI-compatible HTTP server (on the standard library's), bound to 127.0.0.1, and the same
replies in this process behind the LLM seam (`ScriptedModel`)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..llm.transport.client import chat_body, request_headers
from ..llm.types import ChatRequest, Completion, Usage
from . import _baseline_responders as baselines
from . import _embeddings, _tools
from . import _responders as respond
from . import _text as t
from ._batch import BatchStore
from ._drawn import DrawnRelevance, part_key
from ._faults import TRANSPORT_FAULTS, FaultPlan, message_for
from ._reading import Reading, plain_messages


@dataclass(frozen=True)
class LatencyModel:
    """Simulated model latency: a fixed cost per call, per uncached and cached prompt token, per completion token."""

    per_call_ms: float = 0.0
    per_prompt_token_ms: float = 0.0
    per_cached_token_ms: float = 0.0
    per_completion_token_ms: float = 0.0

    def seconds(self, prompt_tokens: int, cached_tokens: int, completion_tokens: int) -> float:
        ms = (self.per_call_ms + (prompt_tokens - cached_tokens) * self.per_prompt_token_ms
              + cached_tokens * self.per_cached_token_ms + completion_tokens * self.per_completion_token_ms)
        return ms / 1000.0


@dataclass(frozen=True)
class Behaviour:
    """How the scripted server serves, beyond its model, window and faults: its timing, its prefix cache,
    what its notes quote, how it draws relevance, and the words of its "too long" reply."""

    latency: LatencyModel | None = None  # each reply waits as a model of this speed would take
    batch_delay_s: float = 0.2  # a batch completes this long after it is created
    cache_blocks: int = 200_000  # prefix-cache capacity in 64-character blocks (LRU), like a KV cache's
    note_sentences: int = 3  # how many of a document's task-related sentences a note quotes
    relevance: DrawnRelevance | None = None  # relevance drawn independently of the words (else word overlap)
    overflow_message: str = ""  # a "too long" reply's words, instead of vLLM's numbered ones (Ollama's say none)


@dataclass
class _State:
    model: str
    max_model_len: int
    faults: FaultPlan | None
    log_path: Path | None
    latency: LatencyModel | None = None
    cache_blocks: int = 200_000  # prefix-cache capacity in 64-character blocks (LRU), like a KV cache's
    note_sentences: int = 3  # how many of a document's task-related sentences a note quotes
    relevance: DrawnRelevance | None = None  # relevance drawn independently of the words (else word overlap)
    overflow_message: str = ""  # a "too long" reply's words, instead of vLLM's numbered ones (Ollama's say none)
    calls: list[dict[str, Any]] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    prefixes: OrderedDict[str, None] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def cached_tokens(self, prompt: str) -> int:
        """Simulated prefix cache: leading 64-character blocks seen before.

        Evicts as vLLM does: the least recently used blocks first, and of one prompt's blocks (used
        at the same time) the end before the beginning, so a prefix many prompts share stays longest.
        """
        cached, digest, keys = 0, hashlib.sha256(), []
        with self.lock:
            hit = True
            for start in range(0, len(prompt) - 63, 64):
                digest.update(prompt[start:start + 64].encode())
                keys.append(digest.hexdigest())
                if hit and keys[-1] in self.prefixes:
                    cached = start + 64
                else:
                    hit = False
            for key in reversed(keys):  # most recent last: this prompt's first block
                self.prefixes[key] = None
                self.prefixes.move_to_end(key)
            while len(self.prefixes) > self.cache_blocks:
                self.prefixes.popitem(last=False)
        return t.tokens(prompt[:cached]) if cached else 0

    def log(self, record: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append(record)
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(record) + "\n")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: _State
    batches: BatchStore

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client let go (a run cancelled mid-call): nothing to say
            self.close_connection = True

    def _send_raw(self, status: int, content_type: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, {"object": "error", "error": {"message": message, "type": "error", "code": status}}, headers)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.state.model, "object": "model",
                                                          "owned_by": "r3con-testing",
                                                          "max_model_len": self.state.max_model_len}]})
        elif self.path == "/_calls":
            with self.state.lock:
                self._send(200, {"calls": list(self.state.calls)})
        elif self.path.startswith(("/v1/files", "/v1/batches")):
            self._send_raw(*self.batches.handle("GET", self.path, self.headers, b""))
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.startswith(("/v1/files", "/v1/batches")):
            self._send_raw(*self.batches.handle("POST", self.path, self.headers, raw))
            return
        if self.path.rstrip("/") == "/v1/embeddings":
            self._embeddings(raw)
            return
        if self.path.rstrip("/") == "/tokenize":  # vLLM's route, beside /v1
            prompt = str((json.loads(raw or b"{}") or {}).get("prompt") or "")
            count = t.tokens(prompt) if prompt else 0
            self._send(200, {"count": count, "max_model_len": self.state.max_model_len, "tokens": list(range(count))})
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route {self.path}")
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._error(400, "body is not JSON")
            return
        self._chat(body, hashlib.sha256(raw).hexdigest())

    def _embeddings(self, raw: bytes) -> None:
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._error(400, "body is not JSON")
            return
        stage = self.headers.get("X-R3con-Stage", "")
        record: dict[str, Any] = {"time": time.time(), "path": self.path, "stage": stage, "mode": "",
                                  "model": body.get("model")}
        if self._transport_fault(record, hashlib.sha256(raw).hexdigest(), stage) in TRANSPORT_FAULTS:
            return
        reply = _embeddings.response(body, self.state.model)
        self.state.log({**record, "inputs": len(reply["data"]), "status": 200,
                        "prompt_tokens": reply["usage"]["prompt_tokens"], "completion_tokens": 0})
        self._send(200, reply)

    def _transport_fault(self, record: dict[str, Any], request_hash: str, stage: str) -> str | None:
        """The fault planned for this attempt at the request; a transport fault (429, 500, hang, drop) is
        answered (or not) and logged here, any other is left to the caller."""
        if self.state.faults is None:
            return None
        with self.state.lock:
            attempt = self.state.attempts.get(request_hash, 0)
            self.state.attempts[request_hash] = attempt + 1
        fault = self.state.faults.decide(request_hash, attempt, stage)
        record["fault"] = fault or "ok"
        if fault in ("429", "500"):
            record["status"] = int(fault)
            self.state.log(record)
            wait = self.state.faults.retry_after_s
            headers = {"Retry-After": str(max(1, round(wait))), "retry-after-ms": str(int(wait * 1000))} if fault == "429" else {}
            self._error(int(fault), "rate limited" if fault == "429" else "internal error", headers)
        elif fault in ("hang", "drop"):  # no response at all: the client times out, or sees the connection close
            record["status"] = 0
            self.state.log(record)
            if fault == "hang":
                time.sleep(self.state.faults.hang_s)
            self.close_connection = True
        return fault

    def _reply(self, r: Reading, request_hash: str, record: dict[str, Any]) -> str:
        """The scripted reply (`scripted_reply`), with the server's drawn notes and planted faults."""
        if r.stage == "relevance" and self.state.relevance is not None:
            key = part_key(self.headers.get("X-R3con-Doc", ""), self.headers.get("X-R3con-Part", ""))
            return self.state.relevance.reply(r, key)
        if r.stage == "populate":
            plan = self.state.faults or FaultPlan()
            reworded: list[str] = []
            misvalued: list[list[Any]] = []
            content, invented = respond.invented_records(r, plan.invent, f"{plan.seed}:{request_hash}",
                                                         plan.reword, reworded, plan.misvalue, misvalued)
            if plan.invent or plan.reword or plan.misvalue:  # for tests: what is not in the document as it stands
                record.update(invented=invented, reworded=reworded, misvalued=misvalued)
            return content
        return scripted_reply(r, self.state.note_sentences)

    def _chat(self, body: dict[str, Any], request_hash: str) -> None:
        h = self.headers
        stage = h.get("X-R3con-Stage", "")
        mode = h.get("X-R3con-Mode", "")
        messages = plain_messages(list(body.get("messages") or []))
        prompt = "".join(f"{m.get('role')}:{m.get('content')}\n" for m in messages)
        record: dict[str, Any] = {"time": time.time(), "path": self.path, "stage": stage, "mode": mode,
                                  "doc": h.get("X-R3con-Doc"), "part": h.get("X-R3con-Part"),
                                  "round": h.get("X-R3con-Round"), "model": body.get("model"),
                                  "max_tokens": body.get("max_tokens"),
                                  "request_hash": request_hash}
        prompt_tokens = t.tokens(prompt)
        if prompt_tokens > self.state.max_model_len:
            record.update(status=400, fault="too-long")
            self.state.log(record)
            self._error(400, self.state.overflow_message or (
                f"This model's maximum context length is {self.state.max_model_len} tokens. "
                f"However, you requested {prompt_tokens} tokens in the messages."))
            return
        fmt = body.get("response_format") or {}
        if self.state.faults is not None and not self.state.faults.json_schema and fmt.get("type") == "json_schema":
            record.update(status=400, fault="no-json-schema")
            self.state.log(record)
            self._error(400, "response_format type 'json_schema' is not supported by this server")
            return
        fault = self._transport_fault(record, request_hash, stage)
        if fault in TRANSPORT_FAULTS:
            return
        reading = Reading.of(body, h)
        tool_message = _tools.tool_reply(body, messages) if reading.tools else None  # OpenAI tool calling
        if tool_message is not None:
            content = tool_message.get("content") or ""
        else:
            content = self._reply(reading, request_hash, record)
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        message, finish = message_for(fault, content, request_hash)
        if tool_message is not None and tool_message.get("tool_calls") and finish == "stop":
            message, finish = tool_message, "tool_calls"
        if limit and t.tokens(message.get("content") or "") > limit:  # written to the budget, as a model told it
            message = {"role": "assistant", "content": within(message.get("content") or "", int(limit))}
        completion_tokens = t.tokens((message.get("content") or "") + (message.get("reasoning_content") or "")
                                     + json.dumps(message.get("tool_calls") or ""))
        cached = self.state.cached_tokens(prompt)
        record.update(status=200, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cached_tokens=cached)
        self.state.log(record)
        if self.state.latency is not None:
            time.sleep(self.state.latency.seconds(prompt_tokens, cached, completion_tokens))
        if self.state.faults is not None and self.state.faults.delay_s:
            time.sleep(self.state.faults.delay_s)
        self._send(200, {
            "id": f"chatcmpl-{request_hash[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or self.state.model,
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens,
                      "prompt_tokens_details": {"cached_tokens": cached}},
        })


def scripted_reply(r: Reading, note_sentences: int = 3) -> str:
    """The scripted reply to one request: by the stage header, then by the mode, the response schema, else prose."""
    if r.stage == "relevance":
        return respond.relevance(r, note_sentences)
    if r.stage == "schema":
        return respond.schema(r)
    if r.stage == "populate":
        return respond.invented_records(r)[0]
    if r.stage in baselines.STAGES:  # the baselines' stages, any mode (see _baseline_responders)
        return baselines.respond(r)
    if r.stage == "judge":
        return respond.judge(r)
    if r.mode == "code":
        return respond.agent(r)
    if _tools.structured_kind(dict(r.schema or {})):  # entity lists and triples (open information extraction)
        return _tools.structured_reply([dict(m) for m in r.messages], dict(r.schema or {}))
    if r.schema is not None:
        return respond.records(r)
    return respond.prose(r)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default 5 resets connections when a run opens a burst of them


class FakeLLMServer:
    """The scripted server in a background thread: `with FakeLLMServer() as s: s.base_url`."""

    _handler: type[_Handler] = _Handler  # a stand-in for another server answers its native routes first

    def __init__(self, port: int = 0, *, model: str = "r3con-scripted", max_model_len: int = 32768,
                 faults: FaultPlan | None = None, log_path: Path | None = None, behaviour: Behaviour | None = None):
        b = behaviour or Behaviour()
        state = _State(model=model, max_model_len=max_model_len, faults=faults, overflow_message=b.overflow_message,
                       log_path=Path(log_path) if log_path else None, latency=b.latency, cache_blocks=b.cache_blocks,
                       note_sentences=b.note_sentences, relevance=b.relevance)
        self.batches = BatchStore(lambda: f"{self.base_url}/chat/completions", delay_s=b.batch_delay_s)
        handler = type("Handler", (self._handler,), {"state": state, "batches": self.batches, "owner": self})
        self._state = state
        self._httpd = _HTTPServer(("127.0.0.1", port), handler)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def calls(self) -> list[dict[str, Any]]:
        with self._state.lock:
            return list(self._state.calls)

    def start(self) -> FakeLLMServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def within(text: str, limit: int) -> str:
    """`text` ended at its last white space (or character) that keeps it within `limit` tokens."""
    low, high = 0, len(text)
    while low < high:  # the longest prefix within the limit
        mid = (low + high + 1) // 2
        low, high = (mid, high) if t.tokens(text[:mid]) <= limit else (low, mid - 1)
    space = text.rfind(" ", 0, low)
    return text[: space if space > low // 2 else low].rstrip()


class ScriptedModel:
    """An in-process model for `r3con.run(..., llm=ScriptedModel())`: the scripted server's replies to each
    request (notes from the document's text, records from the response schema), its token counts, and
    a reply kept within `max_tokens` as a model told it would write it. `requests` lists what it was sent."""

    def __init__(self, name: str = "r3con-scripted", note_sentences: int = 3):
        self.name = name
        self.note_sentences = note_sentences
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        body = chat_body(request, request.model or self.name)
        content = scripted_reply(Reading.of(body, request_headers(request)), self.note_sentences)
        if request.max_tokens and t.tokens(content) > request.max_tokens:
            content = within(content, request.max_tokens)
        prompt = "".join(f"{m.role}:{m.content}\n" for m in request.messages)
        usage = Usage(calls=1, prompt_tokens=t.tokens(prompt), completion_tokens=t.tokens(content))
        return Completion(content=content, finish_reason="stop", usage=usage, model=request.model or self.name)
