"""Bounded capture of the worker's stdout and stderr, split into cells by the worker's end markers."""

from __future__ import annotations

import asyncio
import contextlib

from ._worker import MARKER_PREFIX, clip

_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8 bytes that do not start a character
_CELL_DIGITS = 8


class Capture:
    """Keeps the first and last bytes of a stream and counts its characters, in bounded memory."""

    def __init__(self, limit_chars: int):
        self.limit = limit_chars
        self._keep = 4 * limit_chars  # bytes: enough for `limit_chars` characters of any UTF-8
        self._head = bytearray()
        self._tail = bytearray()
        self._bytes = 0
        self._chars = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        data = bytes(data)
        self._bytes += len(data)
        self._chars += len(data.translate(None, _CONTINUATION))
        if len(self._head) < self._keep:
            self._head += data[: self._keep - len(self._head)]
        self._tail += data[-self._keep:]
        if len(self._tail) > 2 * self._keep:
            del self._tail[: -self._keep]

    def text(self) -> str:
        if self._bytes <= self._keep:
            return clip(self._head.decode("utf-8", errors="replace"), self.limit)
        head_chars = self.limit // 2
        tail_chars = self.limit - head_chars
        head = self._head.decode("utf-8", errors="replace")[:head_chars]
        tail = self._tail[-self._keep:].decode("utf-8", errors="replace")[-tail_chars:]
        cut = max(self._chars - head_chars - tail_chars, 0)
        return f"{head}\n[... {cut} characters cut ...]\n{tail}"


class OutputStream:
    """Drains one pipe of the worker; `collect(cell)` returns what the cell wrote to it."""

    def __init__(self, reader: asyncio.StreamReader, *, limit_chars: int, nonce: str):
        self._reader = reader
        self._limit = limit_chars
        self._prefix = MARKER_PREFIX + nonce.encode("ascii") + b":"
        self._capture = Capture(limit_chars)
        self._finished: dict[int, Capture] = {}
        self._given_up = 0
        self._changed = asyncio.Event()
        self.eof = False
        self._task = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        pending = bytearray()
        try:
            while chunk := await self._reader.read(1 << 16):
                pending += chunk
                pending = self._split(pending)
        finally:
            self._capture.feed(pending)
            self.eof = True
            self._changed.set()

    def _split(self, pending: bytearray) -> bytearray:
        prefix = self._prefix
        while True:
            at = pending.find(prefix)
            if at < 0:
                # The end of `pending` may be the start of a marker: hold those bytes back.
                keep = len(prefix) - 1
                if len(pending) > keep:
                    self._capture.feed(pending[: len(pending) - keep])
                    del pending[: len(pending) - keep]
                return pending
            end = at + len(prefix) + _CELL_DIGITS
            if len(pending) < end:
                self._capture.feed(pending[:at])
                del pending[:at]
                return pending
            digits = bytes(pending[at + len(prefix): end])
            try:
                cell = int(digits, 16)
            except ValueError:
                self._capture.feed(pending[: at + 1])
                del pending[: at + 1]
                continue
            self._capture.feed(pending[:at])
            del pending[:end]
            if cell > self._given_up:
                self._finished[cell] = self._capture
                self._capture = Capture(self._limit)
                self._changed.set()

    async def collect(self, cell: int, timeout: float) -> str:
        """The output of `cell`, once its end marker arrived, the pipe closed, or `timeout` passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while cell not in self._finished and not self.eof:
            self._changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        capture = self._finished.pop(cell, None)
        if capture is None:
            capture, self._capture = self._capture, Capture(self._limit)
            self._given_up = max(self._given_up, cell)
        return capture.text()

    async def close(self, timeout: float) -> None:
        """Wait for the pipe to close (the worker is gone), then stop draining."""
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
