"""The scripted server's Batch API: `/v1/files` (upload, content) and `/v1/batches` (create, retrieve).

A batch completes `delay_s` after it was created. Its lines are answered by POSTing each body to the
server's own `/v1/chat/completions`, so batched and direct calls go through the same scripted logic.
The custom_id of a line carries the stage headers (`stage|mode|doc|part|round|n`, as `r3con.llm.transport.batch`
writes it), because a batch line has no HTTP headers of its own.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

Reply = tuple[int, str, bytes]  # status, content type, body


def _json(status: int, body: dict[str, Any]) -> Reply:
    return status, "application/json", json.dumps(body).encode()


def _error(status: int, message: str) -> Reply:
    return _json(status, {"error": {"message": message, "type": "invalid_request_error", "code": status}})


def headers_from_custom_id(custom_id: str) -> dict[str, str]:
    """The X-R3con-* headers a custom_id of the form `stage|mode|doc|part|round|n` stands for."""
    names = ("X-R3con-Stage", "X-R3con-Mode", "X-R3con-Doc", "X-R3con-Part", "X-R3con-Round")
    values = custom_id.split("|")
    return {name: value for name, value in zip(names, values, strict=False) if value}


@dataclass
class BatchStore:
    """Files and batches of one server, in memory."""

    chat_url: Callable[[], str]
    delay_s: float = 0.2
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, method: str, path: str, headers: Any, body: bytes) -> Reply:
        parts = [p for p in path.split("?")[0].split("/") if p][1:]  # drop "v1"
        if method == "POST" and parts == ["files"]:
            return self._upload(headers.get("Content-Type", ""), body)
        if method == "GET" and len(parts) == 3 and parts[0] == "files" and parts[2] == "content":
            entry = self.files.get(parts[1])
            return (200, "application/octet-stream", entry["data"]) if entry else _error(404, f"no file {parts[1]}")
        if method == "GET" and len(parts) == 2 and parts[0] == "files":
            entry = self.files.get(parts[1])
            return _json(200, entry["object"]) if entry else _error(404, f"no file {parts[1]}")
        if method == "POST" and parts == ["batches"]:
            return self._create(json.loads(body or b"{}"))
        if method == "GET" and len(parts) == 2 and parts[0] == "batches":
            return self._retrieve(parts[1])
        return _error(404, f"no route {path}")

    def _upload(self, content_type: str, body: bytes) -> Reply:
        message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            if isinstance(name, str) and isinstance(payload, bytes):
                fields[name] = (part.get_filename(), payload)
        if "file" not in fields:
            return _error(400, "multipart upload without a 'file' field")
        purpose = fields.get("purpose", (None, b"batch"))[1].decode()
        return _json(200, self.add_file(fields["file"][1], fields["file"][0] or "upload.jsonl", purpose))

    def add_file(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        file_id = f"file-{secrets.token_hex(8)}"
        obj = {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
               "filename": filename, "purpose": purpose, "status": "processed"}
        with self.lock:
            self.files[file_id] = {"data": data, "object": obj}
        return obj

    def _create(self, params: dict[str, Any]) -> Reply:
        input_id = params.get("input_file_id")
        if input_id not in self.files:
            return _error(400, f"no input file {input_id}")
        if params.get("endpoint") != "/v1/chat/completions":
            return _error(400, "only /v1/chat/completions batches are supported")
        batch_id = f"batch_{secrets.token_hex(8)}"
        lines = [ln for ln in self.files[input_id]["data"].decode().splitlines() if ln.strip()]
        now = int(time.time())
        obj: dict[str, Any] = {
            "id": batch_id, "object": "batch", "endpoint": params["endpoint"], "errors": None,
            "input_file_id": input_id, "completion_window": params.get("completion_window", "24h"),
            "status": "in_progress", "output_file_id": None, "error_file_id": None, "created_at": now,
            "in_progress_at": now, "expires_at": now + 86400, "completed_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": params.get("metadata"),
        }
        with self.lock:
            self.batches[batch_id] = obj
        threading.Thread(target=self._process, args=(batch_id, lines), daemon=True).start()
        return _json(200, obj)

    def _retrieve(self, batch_id: str) -> Reply:
        with self.lock:
            obj = self.batches.get(batch_id)
            return _json(200, dict(obj)) if obj else _error(404, f"no batch {batch_id}")

    def _process(self, batch_id: str, lines: list[str]) -> None:
        time.sleep(self.delay_s)
        items = [json.loads(line) for line in lines]
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(lambda item: self._post(
                item.get("body") or {}, headers_from_custom_id(str(item.get("custom_id", "")))), items))
        out: list[str] = []
        failed = 0
        for item, (status, body) in zip(items, answers, strict=True):
            failed += status != 200
            out.append(json.dumps({
                "id": f"batch_req_{secrets.token_hex(6)}", "custom_id": item.get("custom_id"),
                "response": {"status_code": status, "request_id": secrets.token_hex(6), "body": body}, "error": None,
            }))
        output = self.add_file(("\n".join(out) + "\n").encode(), f"{batch_id}_output.jsonl", "batch_output")
        with self.lock:
            self.batches[batch_id].update(
                status="completed", output_file_id=output["id"], completed_at=int(time.time()),
                request_counts={"total": len(lines), "completed": len(lines) - failed, "failed": failed},
            )

    def _post(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(self.chat_url(), data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json", **headers})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")
