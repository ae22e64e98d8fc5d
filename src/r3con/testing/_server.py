"""The scripted OpenAI-compatible HTTP server (standard library only), bound to 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from . import _responders as respond
from . import _text as t


@dataclass(frozen=True)
class FaultPlan:
    """Per-request fault rates; a request (by body hash) gets at most `max_faults_per_request` faults."""

    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_empty: float = 0.0
    retry_after_s: float = 0.05
    seed: int = 0
    max_faults_per_request: int = 2

    @classmethod
    def parse(cls, spec: str) -> FaultPlan:
        """E.g. '429=0.2,500=0.1,empty=0.05,seed=7,max=2'."""
        names = {"429": "rate_429", "500": "rate_500", "empty": "rate_empty", "seed": "seed",
                 "max": "max_faults_per_request", "retry_after": "retry_after_s"}
        values: dict[str, Any] = {}
        for item in filter(None, (p.strip() for p in spec.split(","))):
            key, _, raw = item.partition("=")
            if key not in names:
                raise ValueError(f"unknown fault {key!r}; known: {', '.join(names)}")
            values[names[key]] = int(raw) if key in ("seed", "max") else float(raw)
        return cls(**values)

    def decide(self, request_hash: str, attempt: int) -> str | None:
        if attempt >= self.max_faults_per_request:
            return None
        roll = random.Random(f"{self.seed}:{request_hash}:{attempt}").random()
        for kind, rate in (("429", self.rate_429), ("500", self.rate_500), ("empty", self.rate_empty)):
            if roll < rate:
                return kind
            roll -= rate
        return None


@dataclass
class _State:
    model: str
    max_model_len: int
    faults: FaultPlan | None
    log_path: Path | None
    calls: list[dict[str, Any]] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    prefixes: OrderedDict[str, None] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def cached_tokens(self, prompt: str) -> int:
        """Simulated prefix cache: leading 64-character blocks seen before."""
        cached, digest = 0, hashlib.sha256()
        with self.lock:
            hit = True
            for start in range(0, len(prompt) - 63, 64):
                digest.update(prompt[start:start + 64].encode())
                key = digest.hexdigest()
                if hit and key in self.prefixes:
                    cached = start + 64
                    self.prefixes.move_to_end(key)
                else:
                    hit = False
                    self.prefixes[key] = None
            while len(self.prefixes) > 200_000:
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
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route {self.path}")
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._error(400, "body is not JSON")
            return
        self._chat(body, hashlib.sha256(raw).hexdigest())

    def _chat(self, body: dict[str, Any], request_hash: str) -> None:
        h = self.headers
        stage = h.get("X-R3con-Stage", "")
        mode = h.get("X-R3con-Mode", "")
        messages = body.get("messages") or []
        prompt = "".join(f"{m.get('role')}:{m.get('content')}\n" for m in messages)
        record: dict[str, Any] = {"time": time.time(), "path": self.path, "stage": stage, "mode": mode,
                                  "doc": h.get("X-R3con-Doc"), "part": h.get("X-R3con-Part"),
                                  "round": h.get("X-R3con-Round"), "model": body.get("model"),
                                  "request_hash": request_hash}
        prompt_tokens = t.tokens(prompt)
        if prompt_tokens > self.state.max_model_len:
            record.update(status=400, fault="too-long")
            self.state.log(record)
            self._error(400, f"This model's maximum context length is {self.state.max_model_len} tokens. "
                             f"However, you requested {prompt_tokens} tokens in the messages.")
            return
        fault = None
        if self.state.faults is not None:
            with self.state.lock:
                attempt = self.state.attempts.get(request_hash, 0)
                self.state.attempts[request_hash] = attempt + 1
            fault = self.state.faults.decide(request_hash, attempt)
        record["fault"] = fault or "ok"
        if fault in ("429", "500"):
            record["status"] = int(fault)
            self.state.log(record)
            wait = self.state.faults.retry_after_s if self.state.faults else 0
            headers = {"Retry-After": str(max(1, round(wait))), "retry-after-ms": str(int(wait * 1000))} if fault == "429" else {}
            self._error(int(fault), "rate limited" if fault == "429" else "internal error", headers)
            return
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None
        round_no = int(h.get("X-R3con-Round") or 1)
        if stage == "relevance":
            content = respond.relevance(messages, round_no)
        elif stage == "schema":
            content = respond.schema(messages)
        elif stage == "populate":
            content = respond.records(messages, schema)
        elif stage == "judge":
            content = respond.judge(messages, schema)
        elif mode == "code":
            content = respond.agent(messages)
        elif schema is not None:
            content = respond.records(messages, schema)
        else:
            content = respond.prose(messages)
        if fault == "empty":
            content = ""
        finish = "stop"
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        if limit and t.tokens(content) > limit:
            content, finish = content[: int(limit) * 4], "length"
        completion_tokens = t.tokens(content)
        cached = self.state.cached_tokens(prompt)
        record.update(status=200, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cached_tokens=cached)
        self.state.log(record)
        self._send(200, {
            "id": f"chatcmpl-{request_hash[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or self.state.model,
            "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens,
                      "prompt_tokens_details": {"cached_tokens": cached}},
        })


class FakeLLMServer:
    """The scripted server in a background thread: `with FakeLLMServer() as s: s.base_url`."""

    def __init__(self, port: int = 0, *, model: str = "r3con-scripted", max_model_len: int = 32768,
                 faults: FaultPlan | None = None, log_path: Path | None = None):
        state = _State(model=model, max_model_len=max_model_len, faults=faults,
                       log_path=Path(log_path) if log_path else None)
        handler = type("Handler", (_Handler,), {"state": state})
        self._state = state
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._httpd.daemon_threads = True
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
