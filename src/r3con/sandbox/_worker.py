"""The sandbox worker process: confines itself, loads the data, then runs cells sent by the parent.

Run by `r3con.sandbox` as `python -I -B <this file> <config json>`, never imported by the worker
itself as part of r3con: it uses the standard library only (plus pandas/numpy for the namespace) and
loads `_confine.py` by path. Three processes take part:

    A  the process the parent started (own session): enters the namespaces, forks B, waits for it
    B  PID 1 of the new PID namespace: builds the read-only root, forks C, reaps orphans; when C
       ends, B exits and the kernel kills everything left in the namespace
    C  the REPL: imports, binds the data, sets rlimits, drops to the sandbox uid, serves cells

Protocol, over the socket whose fd number is in the config: frames of a 4-byte big-endian length
and a UTF-8 JSON object. User code writes to fds 1 and 2, which are pipes the parent reads; after
each cell C writes an end marker to both so the parent knows which output belongs to the cell.
"""

from __future__ import annotations

import ast
import builtins
import fcntl
import gc
import importlib
import importlib.util
import io
import json
import linecache
import os
import socket
import struct
import sys
import threading
import traceback
import types
from collections.abc import Callable
from typing import Any

HEADER = struct.Struct(">I")
MAX_WORKER_FRAME = 64 * 1024 * 1024  # what the parent accepts from the (untrusted) worker
MARKER_PREFIX = b"\x00\x1bR3CON-END:"
MAX_ERROR_CHARS = 100_000

# Imported before the privilege drop, so that code can use them even where the interpreter's files
# are unreadable for the sandbox uid (no mount namespace to expose them).
PRELOAD = (
    "pandas", "numpy", "json", "re", "math", "collections", "itertools", "functools", "operator",
    "statistics", "datetime", "decimal", "fractions", "random", "string", "textwrap", "heapq", "bisect",
    "csv", "io", "typing", "dataclasses", "difflib", "unicodedata", "copy", "pprint", "time", "calendar",
    "enum", "hashlib", "base64", "uuid", "zoneinfo", "contextlib", "numbers", "array", "struct",
)
OPTIONAL_PRELOAD = ("duckdb",)


def encode_frame(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, ensure_ascii=False).encode("utf-8")
    return HEADER.pack(len(data)) + data


def marker(nonce: str, cell: int) -> bytes:
    return MARKER_PREFIX + nonce.encode("ascii") + b":" + f"{cell:08x}".encode("ascii")


class _Channel:
    """The worker's end of the protocol socket (blocking)."""

    def __init__(self, fd: int):
        os.set_inheritable(fd, False)  # programs the code starts do not get the channel
        self._sock = socket.socket(fileno=fd)
        self._lock = threading.Lock()

    def _read_exactly(self, size: int) -> bytes | None:
        data = bytearray(size)
        view = memoryview(data)
        got = 0
        while got < size:
            n = self._sock.recv_into(view[got:])
            if n == 0:
                return None
            got += n
        return bytes(data)

    def receive(self) -> dict[str, Any] | None:
        header = self._read_exactly(HEADER.size)
        if header is None:
            return None
        body = self._read_exactly(HEADER.unpack(header)[0])
        return None if body is None else json.loads(body)

    def send(self, message: dict[str, Any]) -> None:
        self._sock.sendall(encode_frame(message))

    def request(self, message: dict[str, Any]) -> dict[str, Any] | None:
        with self._lock:
            self.send(message)
            return self.receive()


def _load_confine() -> Any:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_confine.py")
    spec = importlib.util.spec_from_file_location("r3con_sandbox_confine", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exit_status(status: int) -> int:
    """A child's wait status as an exit code: 128+N for death by signal N, like a shell."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _wait_for(child: int, *, reap_all: bool) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1 if reap_all else child, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == child:
            os._exit(_exit_status(status))


# -- values -----------------------------------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """`value` as JSON-compatible data; numpy scalars become numbers, other non-JSON values str(value)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        try:
            return jsonable(item())
        except (TypeError, ValueError):
            pass
    return str(value)


def _at(variables: dict[str, Any], path: list[str]) -> Any:
    """The value at `path` (a variable's name, then keys) in the variables the init frame sent."""
    value = variables[path[0]]
    for key in path[1:]:
        value = value[key]
    return value


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, keeping head and tail around a marker that says how much went
    (here, standard library only, so that the worker and the parent share it)."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"


# -- cells ------------------------------------------------------------------------------------------


class _FinalAnswer(BaseException):
    """Raised by final_answer() to end the cell; a BaseException so `except Exception` lets it pass."""


class HostFunctionError(RuntimeError):
    """A host function failed in the parent."""


class _Repl:
    def __init__(self, channel: _Channel, nonce: str, internal_files: set[str]):
        self.channel = channel
        self.nonce = nonce
        self.internal_files = internal_files
        self.pid = os.getpid()
        self.module = types.ModuleType("__main__")
        self.ns: dict[str, Any] = self.module.__dict__
        self.ns["__builtins__"] = builtins
        self.final: tuple[Any, Any] | None = None  # (value, cite)
        self.stdout, self.stderr = sys.stdout, sys.stderr
        # Copies of the output pipes, put back before each cell in case the code closed or replaced fds 1, 2.
        self.pipes = {fd: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in (1, 2)}

    def bind(self, init: dict[str, Any], modules: dict[str, Any]) -> None:
        import pandas as pd

        ns = self.ns
        ns.update(modules)
        variables: dict[str, Any] = init["variables"]
        ns.update(variables)
        for name, path in init["aliases"].items():  # a list sent once for several names: one list here too
            ns[name] = _at(variables, path)
        frames = {name: pd.DataFrame(_at(variables, given["at"]) if "at" in given else given["rows"])
                  for name, given in init["dataframes"].items()}
        for name, frame in frames.items():
            ns.setdefault(name, frame)  # a name given as a variable too keeps the variable
        ns["dfs"] = frames
        ns["final_answer"] = self._final_answer
        ns["HostFunctionError"] = HostFunctionError
        for name in init["host_functions"]:
            ns[name] = self._host_function(name)
        sys.modules["__main__"] = self.module

    def _final_answer(self, value: Any, cite: Any = None) -> None:
        """Record `value` as the answer (and `cite`, the ids of the records or documents it rests on); end the cell."""
        self.final = (value, cite)
        raise _FinalAnswer

    def _host_function(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if os.getpid() != self.pid:
                raise RuntimeError(f"{name}() can only be called from the sandbox's main process")
            message = {"type": "call", "name": name, "args": list(args), "kwargs": kwargs}
            try:
                json.dumps(message)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"{name}() takes JSON-compatible arguments only: {exc}") from None
            reply = self.channel.request(message)
            if reply is None:
                os._exit(0)
            if reply.get("ok"):
                return reply.get("value")
            raise HostFunctionError(f"{name}() failed: {reply.get('error')}")

        call.__name__ = call.__qualname__ = name
        return call

    def run(self, cell: int, code: str) -> dict[str, Any]:
        filename = f"<cell {cell}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        for fd, copy in self.pipes.items():
            os.dup2(copy, fd)
        sys.stdout, sys.stderr = self.stdout, self.stderr
        self.final = None
        error: str | None = None
        memory_exhausted = False
        try:
            tree = ast.parse(code, filename, "exec")
            last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            if last is not None:
                tree.body.pop()
            exec(compile(tree, filename, "exec"), self.ns)
            if last is not None:
                # Like a notebook: the value of a final expression is shown.
                value = eval(compile(ast.Expression(last.value), filename, "eval"), self.ns)
                if value is not None:
                    print(repr(value))
        except _FinalAnswer:
            pass
        except BaseException as exc:  # noqa: B036 - SystemExit and KeyboardInterrupt are the code's too
            if os.getpid() == self.pid:
                error = self._format(exc)
                memory_exhausted = isinstance(exc, MemoryError) and self._out_of_memory()
        finally:
            if os.getpid() != self.pid:
                os._exit(0)  # a process the code forked came back here: it must not speak the protocol
        self._end_output(cell)
        result: dict[str, Any] = {"type": "result", "error": error, "memory_exhausted": memory_exhausted,
                                  "final": self.final is not None, "value": None}
        if self.final is not None:
            result["value"] = jsonable(self.final[0])
            result["cite"] = jsonable(self.final[1]) if self.final[1] is not None else None
            size = len(json.dumps(result["value"], ensure_ascii=False))
            if size > MAX_WORKER_FRAME // 2:
                result["value"] = f"<final answer too large: {size} characters of JSON>"
        return result

    def _end_output(self, cell: int) -> None:
        end = marker(self.nonce, cell)
        for stream, fd in ((self.stdout, 1), (self.stderr, 2)):
            try:
                os.dup2(self.pipes[fd], fd)  # the code may have closed or replaced the fd
                stream.flush()
            except (OSError, ValueError):
                pass
            try:
                os.write(fd, end)
            except OSError:
                pass  # the parent stops waiting for this cell's output after a grace period

    def _format(self, exc: BaseException) -> str:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename not in self.internal_files]
        lines: list[str] = []
        if frames:
            shown = frames[-5:]
            user = [i for i, f in enumerate(frames) if f.filename.startswith("<cell ")]
            lines.append("Traceback (most recent call last):\n")
            if user and user[-1] < len(frames) - 5:
                lines.extend(traceback.format_list([frames[user[-1]]]))
                lines.append("  ...\n")
            elif len(frames) > 5:
                lines.append("  ...\n")
            lines.extend(traceback.format_list(shown))
        lines.extend(traceback.format_exception_only(type(exc), exc))
        return clip("".join(lines), MAX_ERROR_CHARS)

    @staticmethod
    def _out_of_memory() -> bool:
        """Whether the worker is still near its memory limit after a MemoryError."""
        gc.collect()
        try:
            bytearray(64 * 1024 * 1024)
        except MemoryError:
            return True
        return False


# -- the three processes ----------------------------------------------------------------------------


def _preload(*, files_readable_later: bool) -> dict[str, Any]:
    modules: dict[str, Any] = {}
    for name in PRELOAD:
        importlib.import_module(name)
    # With the read-only root the interpreter's files stay readable, so duckdb (0.1 s) loads on demand.
    for name in () if files_readable_later else OPTIONAL_PRELOAD:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
    import collections
    import math
    import re

    import numpy
    import pandas

    modules.update(pd=pandas, np=numpy, json=json, re=re, math=math, collections=collections)
    return modules


def _confine_c(confine: Any, config: dict[str, Any], report: dict[str, str]) -> None:
    """Limits and privileges of the REPL process, in an order where each step is still permitted."""
    skip = set(config["skip"])
    if "rlimits" in skip:
        report["rlimits"] = "off: skipped on request"
    else:
        limits = dict(config["limits"])
        if not config["as_root"] and confine.in_initial_user_namespace():
            # RLIMIT_NPROC counts every process of the uid; without a user namespace of its own that
            # includes the parent user's other processes, so the sandbox gets its share on top of them.
            limits["max_processes"] += confine.tasks_of(os.getuid())
        try:
            confine.set_rlimits(**limits)
            report["rlimits"] = "on"
        except (OSError, ValueError) as exc:
            report["rlimits"] = f"off: setrlimit refused ({exc})"
    os.chdir(config["scratch"])
    bounding_dropped = False
    if "no_new_privs" not in skip:
        try:
            confine.drop_bounding_set()
            bounding_dropped = True
        except OSError:
            pass
    if "unprivileged_uid" in skip:
        report["unprivileged_uid"] = "off: skipped on request"
    elif not config["as_root"]:
        # The worker keeps the parent's (unprivileged) uid; that is only safe while the parent's
        # processes are out of its sight, or it could signal, trace or read them.
        if report.get("pid_namespace") == "on":
            report["unprivileged_uid"] = "on"
        else:
            report["unprivileged_uid"] = ("off: the worker shares the parent's uid and, without a PID namespace, "
                                          "could signal or read the parent's processes")
    else:
        try:
            confine.drop_to(config["uid"], config["gid"])
            report["unprivileged_uid"] = "on"
        except OSError as exc:
            report["unprivileged_uid"] = f"off: cannot change uid ({exc.strerror})"
    # Without a uid drop the worker may still hold capabilities (root's, or those a new user namespace grants).
    if (report["unprivileged_uid"] != "on" or not config["as_root"]) and "no_new_privs" not in skip:
        try:
            confine.clear_capabilities()
        except OSError:
            pass
    if "no_new_privs" in skip:
        report["no_new_privs"] = "off: skipped on request"
    else:
        try:
            confine.forbid_new_privileges()
            # An unprivileged process without a user namespace has no capability to drop; no_new_privs
            # keeps it from gaining any on exec.
            dropped = bounding_dropped or not config["as_root"]
            report["no_new_privs"] = "on" if dropped else "off: cannot clear the capability bounding set"
        except OSError as exc:
            report["no_new_privs"] = f"off: prctl refused ({exc.strerror})"
    confine.die_with_parent(None)  # a uid change clears the parent-death signal


def _serve(confine: Any, config: dict[str, Any], report: dict[str, str]) -> None:
    channel = _Channel(config["fd"])
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True, errors="backslashreplace")
    modules = _preload(files_readable_later=report.get("readonly_fs") == "on")
    init = channel.receive()
    if init is None:
        os._exit(0)
    internal = {os.path.abspath(__file__), os.path.abspath(confine.__file__)}
    repl = _Repl(channel, config["nonce"], internal)
    try:
        _confine_c(confine, config, report)
        repl.bind(init, modules)
    except (OSError, MemoryError, ValueError, TypeError) as exc:
        channel.send({"type": "fatal", "error": f"{type(exc).__name__}: {exc}"})
        os._exit(3)
    del init
    gc.collect()
    channel.send({"type": "ready", "layers": report})
    while True:
        message = channel.receive()
        if message is None or message.get("type") != "run":
            os._exit(0)
        channel.send(repl.run(int(message["cell"]), str(message["code"])))


def main(argv: list[str]) -> None:
    config = json.loads(argv[1])
    confine = _load_confine()
    confine.die_with_parent(config["parent_pid"])
    report: dict[str, str] = {"process": "on", "env": "on", "scratch_dir": "on"}
    mount_ns = confine.enter_namespaces(as_root=config["as_root"], skip=config["skip"], report=report)
    child = os.fork()
    if child:  # A
        os.close(config["fd"])
        _harden_reaper(confine)
        _wait_for(child, reap_all=False)
    # B
    confine.die_with_parent(None)
    if report.get("pid_namespace") == "on" and os.getpid() != 1:
        report["pid_namespace"] = "off: the worker did not become PID 1 of a new namespace"
    pid_ns = report.get("pid_namespace") == "on"
    if mount_ns:
        expose = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path]
        try:
            confine.build_root(expose=expose, scratch=config["scratch"], with_proc=pid_ns)
        except OSError as exc:
            report["readonly_fs"] = f"off: cannot build the read-only root ({exc})"
    child = os.fork()
    if child:
        os.close(config["fd"])
        _harden_reaper(confine)
        _wait_for(child, reap_all=True)
    _serve(confine, config, report)


def _harden_reaper(confine: Any) -> None:
    """B only reaps from now on: nothing for the code in C to trace, and no capability to gain by it."""
    for step in (confine.forbid_new_privileges, confine.drop_bounding_set, confine.clear_capabilities):
        try:
            step()
        except OSError:
            pass


if __name__ == "__main__":
    main(sys.argv)
