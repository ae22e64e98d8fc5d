"""One life of the worker process, seen from the parent: spawn, protocol, output pipes, kill."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import SandboxError
from . import _worker
from ._output import OutputStream
from ._results import SandboxLimits

WORKER_SCRIPT = Path(_worker.__file__).resolve()
START_TIMEOUT_S = 120.0
_INIT_CHUNK = 1 << 20


class ProtocolError(Exception):
    """The worker sent something that is not a frame of the protocol (the code tampered with it)."""


class WorkerGone(Exception):
    """The worker's end of the protocol closed: it died or was killed."""


def worker_env(scratch: Path) -> dict[str, str]:
    """The worker's whole environment, built from nothing: no variable of the parent is passed on."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "PYTHONDONTWRITEBYTECODE": "1",
        # One thread per library keeps RLIMIT_AS and RLIMIT_NPROC meaningful and runs deterministic.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_MAX_THREADS": "1",
        # glibc reserves 64 MB of address space per thread arena; two arenas keep RLIMIT_AS for the data.
        "MALLOC_ARENA_MAX": "2",
    }


def describe_exit(returncode: int | None, limits: SandboxLimits) -> str:
    """Plain words for how the worker ended."""
    if returncode is None:
        return "the worker stopped answering"
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if number:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        why = {
            "SIGSEGV": "a segmentation fault",
            "SIGBUS": "a bus error",
            "SIGXCPU": f"its CPU time limit ({limits.cpu_s} s of CPU per process) ran out",
            "SIGKILL": "it was killed (out of memory or CPU time)",
            "SIGABRT": "it aborted",
        }.get(name, f"it received {name}")
        return f"the worker died: {why}"
    return f"the worker exited with status {returncode}"


async def kill_all_of(uid: int) -> None:
    """SIGKILL every process of `uid` (the parent is root): kill(-1) from a shell running as that uid."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", "kill -9 -1", user=uid, group=uid, extra_groups=[], env={"PATH": "/usr/bin:/bin"}, cwd="/",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return
    await proc.wait()


class WorkerProcess:
    """A running worker; create it with `await WorkerProcess.spawn(...)`."""

    def __init__(self, proc: asyncio.subprocess.Process, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, stdout: OutputStream, stderr: OutputStream):
        self.proc = proc
        self._reader = reader
        self._writer = writer
        self.stdout = stdout
        self.stderr = stderr
        self.layers: dict[str, str] = {}
        self.uid: int | None = None  # the sandbox uid when the worker dropped to it (the parent is root)

    @classmethod
    async def spawn(cls, *, scratch: Path, init_frame: IO[bytes], limits: SandboxLimits, uid: int,
                    skip: Sequence[str], nonce: str) -> WorkerProcess:
        parent_sock, child_sock = socket.socketpair()
        as_root = os.geteuid() == 0
        config = {
            "fd": child_sock.fileno(), "parent_pid": os.getpid(), "as_root": as_root, "uid": uid, "gid": uid,
            "scratch": str(scratch), "nonce": nonce, "limits": limits.rlimits(), "skip": list(skip),
        }
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-B", str(WORKER_SCRIPT), json.dumps(config),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                pass_fds=(child_sock.fileno(),), start_new_session=True, env=worker_env(scratch), cwd=scratch,
            )
        except OSError as exc:
            parent_sock.close()
            raise SandboxError(f"cannot start the sandbox worker ({exc.strerror or exc})") from exc
        finally:
            child_sock.close()
        reader, writer = await asyncio.open_connection(sock=parent_sock)
        if proc.stdout is None or proc.stderr is None:
            raise SandboxError("the sandbox worker has no output pipes")
        worker = cls(proc, reader, writer,
                     OutputStream(proc.stdout, limit_chars=limits.output_chars, nonce=nonce),
                     OutputStream(proc.stderr, limit_chars=limits.output_chars, nonce=nonce))
        try:
            ready = await asyncio.wait_for(worker._start(init_frame), START_TIMEOUT_S)
        except (WorkerGone, ProtocolError, TimeoutError, ConnectionError) as exc:
            await worker.kill()
            stderr = await worker.stderr.collect(-1, 0)
            raise SandboxError(f"the sandbox worker failed to start: {stderr.strip()[-2000:] or exc!r}") from exc
        except BaseException:  # cancelled while starting: leave no worker behind
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        if ready.get("type") != "ready":
            await worker.kill()
            raise SandboxError(f"the sandbox worker failed to start: {ready.get('error', ready)}")
        worker.layers = {str(k): str(v) for k, v in ready.get("layers", {}).items()}
        if as_root and worker.layers.get("unprivileged_uid") == "on":
            worker.uid = uid
        return worker

    async def _start(self, init_frame: IO[bytes]) -> dict[str, Any]:
        """Send the worker its first frame from the file that holds it, a MiB at a time as the worker reads
        (a run's records are not copied into the transport's buffer whole); its answer."""
        init_frame.seek(0)
        while chunk := init_frame.read(_INIT_CHUNK):
            self._writer.write(chunk)
            await self._writer.drain()
        return await self.receive()

    async def send(self, message: Mapping[str, Any]) -> None:
        self._writer.write(_worker.encode_frame(dict(message)))
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()

    async def receive(self) -> dict[str, Any]:
        """The next frame from the worker; raises WorkerGone at EOF and ProtocolError on garbage."""
        try:
            header = await self._reader.readexactly(_worker.HEADER.size)
            (size,) = _worker.HEADER.unpack(header)
            if size > _worker.MAX_WORKER_FRAME:
                raise ProtocolError(f"frame of {size} bytes")
            body = await self._reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise WorkerGone from exc
        try:
            message = json.loads(body)
        except ValueError as exc:
            raise ProtocolError("frame is not JSON") from exc
        if not isinstance(message, dict):
            raise ProtocolError("frame is not a JSON object")
        return message

    async def kill(self, *, grace_s: float = 0.0) -> None:
        """Kill the worker's process group (its PID namespace dies with it) and close everything.

        With `grace_s`, a worker that is dying anyway gets that long to exit, so that its exit status
        tells how it died.
        """
        if grace_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.proc.wait()), grace_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.uid is not None and self.layers.get("pid_namespace") != "on":
            # No PID namespace takes the code's other processes down with the worker (one may have left
            # the process group with setsid): kill everything that runs as the sandbox's own uid.
            await kill_all_of(self.uid)
        try:
            await asyncio.wait_for(self.proc.wait(), 5.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()
        await self.stdout.close(2.0)
        await self.stderr.close(2.0)
