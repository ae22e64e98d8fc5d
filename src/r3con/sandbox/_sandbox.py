"""The parent side of the sandbox: one persistent worker per Sandbox, restarted when it dies."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import IO, Any, Literal

from ..artifacts.jsonstream import json_pieces, listlike
from ..errors import SandboxError
from ._process import ProtocolError, WorkerGone, WorkerProcess, describe_exit
from ._results import LAYERS, OPTIONAL_LAYERS, CellResult, IsolationReport, SandboxLimits
from ._worker import HEADER, clip, jsonable

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_OUTPUT_GRACE_S = 2.0  # how long the parent waits for a finished cell's output to arrive
# Sandbox uids are drawn from this range, one per Sandbox, so that RLIMIT_NPROC counts only its own
# processes and no two sandboxes can signal or read each other.
_UID_RANGE = (1_000_000, 2_000_000_000)

HostFunction = Callable[..., Awaitable[Any]]


class Sandbox:
    """A Python REPL in an isolated worker process; variables persist across cells.

    `variables` are JSON-compatible values bound as globals; each of `dataframes` is bound as a pandas
    DataFrame under its name (unless a variable has that name) and all of them in `dfs`. `final_answer`,
    `pd`, `np`, `json`, `re`, `math` and `collections` are bound too. Each of `host_functions` is bound
    as a plain function that runs the async host function in the parent (JSON arguments and result).
    A list given twice (as a variable and as a key of an earlier variable, or as a DataFrame's rows) is
    sent to the worker once and is one list there too: a run's records are not copied three times.
    `hidden`: keys left out of every mapping in a list (the records' fields the model is not shown), as the
    data is written: the rows are not copied first.
    `mode="strict"` refuses to start without every isolation layer; `skip_layers` leaves layers out on
    purpose (benchmarks, tests) and is reported like a layer the kernel refused.
    """

    def __init__(
        self,
        *,
        variables: Mapping[str, Any] = _EMPTY,
        dataframes: Mapping[str, Sequence[Mapping[str, Any]]] = _EMPTY,
        limits: SandboxLimits = SandboxLimits(),
        mode: Literal["best", "strict"] = "best",
        host_functions: Mapping[str, HostFunction] = _EMPTY,
        scratch_root: Path | None = None,
        skip_layers: Collection[str] = (),
        hidden: Collection[str] = (),
    ):
        if mode not in ("best", "strict"):
            raise SandboxError(f"sandbox mode must be 'best' or 'strict', not {mode!r}")
        unknown = set(skip_layers) - OPTIONAL_LAYERS
        if unknown:
            raise SandboxError(f"cannot skip sandbox layers {sorted(unknown)}; optional: {sorted(OPTIONAL_LAYERS)}")
        for name in (*variables, *dataframes, *host_functions):
            if not name.isidentifier():
                raise SandboxError(f"sandbox names must be Python identifiers, not {name!r}")
        self._variables = dict(variables)
        self._dataframes: dict[str, Sequence[Any]] = {name: rows if listlike(rows) else list(rows)
                                                      for name, rows in dataframes.items()}
        self._host_functions = dict(host_functions)
        self._hidden = frozenset(hidden)
        self.limits = limits
        self.mode = mode
        self._scratch_root = scratch_root
        self._skip = sorted(skip_layers)
        self._uid = _UID_RANGE[0] + secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0])
        self._nonce = secrets.token_hex(8)
        self._lock = asyncio.Lock()
        self._init_frame: IO[bytes] | None = None  # the worker's data, on disk (`_write_init`)
        self._worker: WorkerProcess | None = None
        self._scratch: Path | None = None
        self._report: IsolationReport | None = None
        self._cells = 0
        self._closed = False
        self._interrupted = False  # a run() was cancelled mid-cell: the worker's state is unknown

    @property
    def isolation(self) -> IsolationReport:
        """The isolation layers of the running worker."""
        if self._report is None:
            raise SandboxError("the sandbox has not been started; call start() or use 'async with'")
        return self._report

    @property
    def scratch_dir(self) -> Path | None:
        """The worker's working directory, while the sandbox is open."""
        return self._scratch

    async def __aenter__(self) -> Sandbox:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def start(self) -> None:
        """Start the worker; raises SandboxError if it cannot start, or in strict mode lacks a layer."""
        if self._worker is not None:
            return
        if self._closed:
            raise SandboxError("the sandbox was closed; create a new one")
        if self._init_frame is None:  # written once; the data is not held past it (a failed start may be retried)
            self._init_frame = self._write_init()
            self._variables, self._dataframes = {}, {}
        self._scratch = self._make_scratch()
        try:
            await self._spawn()
        except BaseException:
            self._remove_scratch()
            raise
        missing = self.isolation.missing()
        if missing and self.mode == "strict":
            await self.close()
            raise SandboxError(
                f"the sandbox lacks isolation layers in strict mode: {self.isolation.describe_missing()}; "
                "run as root or where unprivileged user namespaces are allowed, or use --sandbox best"
            )
        refused = [name for name in missing if name not in self._skip]
        if refused:
            print(f"r3con: sandbox: {self.isolation.describe_missing(refused)}; running with the rest "
                  "(--sandbox strict refuses to)", file=sys.stderr)

    async def close(self) -> None:
        """Kill the worker and remove the scratch dir."""
        self._closed = True
        async with self._lock:
            if self._worker is not None:
                worker, self._worker = self._worker, None
                await worker.kill()
            self._remove_scratch()
            if self._init_frame is not None:
                self._init_frame.close()

    def _write_init(self) -> IO[bytes]:
        """The worker's first frame (its data), written to an unnamed temporary file that every start of the
        worker reads: a run's records are the largest thing the answer stage holds, and are not held twice."""
        try:
            out = tempfile.TemporaryFile()
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, f"a temporary file in {tempfile.gettempdir()} (TMPDIR)") from exc
        try:
            write_frame({**_once(self._variables, self._dataframes), "host_functions": sorted(self._host_functions)},
                        out, self._hidden)
            out.flush()
        except (TypeError, ValueError) as exc:
            out.close()
            raise SandboxError(f"sandbox variables and dataframes must be JSON-compatible: {exc}") from exc
        except OSError as exc:  # named, so that a full disk's message says where (an unnamed file has no name)
            out.close()
            raise OSError(exc.errno, exc.strerror, f"a temporary file in {tempfile.gettempdir()} (TMPDIR)") from exc
        return out

    async def run(self, code: str) -> CellResult:
        """Run one cell; whatever the code does becomes part of the result, never an exception."""
        async with self._lock:
            if self._worker is None:
                raise SandboxError("the sandbox is not running; call start() or use 'async with'")
            restarted = False
            if self._interrupted:
                # The cancelled cell may still run and its result is still due: start afresh.
                await self._worker.kill()
                await self._restart()
                self._interrupted, restarted = False, True
            if self._worker is None:
                raise SandboxError("the sandbox worker could not be restarted")
            try:
                result = await self._run(self._worker, code)
            except asyncio.CancelledError:
                self._interrupted = True
                raise
            return replace(result, restarted=True) if restarted else result

    # -- internals ---------------------------------------------------------------------------------

    def _make_scratch(self) -> Path:
        root = self._scratch_root if self._scratch_root is not None else Path(tempfile.gettempdir())
        try:
            root.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix="sandbox-", dir=root)).resolve()
            if os.geteuid() == 0:
                os.chown(scratch, self._uid, self._uid)
        except OSError as exc:
            raise SandboxError(f"cannot create the sandbox scratch dir under {root}: {exc.strerror or exc}") from exc
        return scratch

    def _remove_scratch(self) -> None:
        if self._scratch is None:
            return
        scratch, self._scratch = self._scratch, None
        # The code may have left directories without permissions; the parent owns or is root.
        for dirpath, dirnames, _ in os.walk(scratch):
            for name in dirnames:
                path = os.path.join(dirpath, name)
                if not os.path.islink(path):
                    try:
                        os.chmod(path, 0o700)
                    except OSError:
                        pass
        shutil.rmtree(scratch, ignore_errors=True)

    async def _spawn(self) -> None:
        if self._scratch is None or self._init_frame is None:
            raise SandboxError("the sandbox has no scratch dir")
        worker = await WorkerProcess.spawn(scratch=self._scratch, init_frame=self._init_frame, limits=self.limits,
                                           uid=self._uid, skip=self._skip, nonce=self._nonce)
        layers = dict(worker.layers)
        for name in self._skip:
            layers[name] = "off: skipped on request"
        self._report = IsolationReport({name: layers.get(name, "off: not reported by the worker") for name in LAYERS})
        self._worker = worker

    async def _restart(self) -> None:
        self._worker = None
        await self._spawn()
        if self.mode == "strict" and self.isolation.missing():
            raise SandboxError(f"the restarted sandbox lacks isolation layers: {self.isolation.describe_missing()}")

    async def _run(self, worker: WorkerProcess, code: str) -> CellResult:
        loop = asyncio.get_running_loop()
        self._cells += 1
        cell = self._cells
        started = loop.time()
        deadline = started + self.limits.timeout_s
        await worker.send({"type": "run", "cell": cell, "code": code})
        while True:
            try:
                message = await asyncio.wait_for(worker.receive(), max(deadline - loop.time(), 0.0))
            except TimeoutError:
                return await self._stopped(worker, cell, started, timed_out=True)
            except (WorkerGone, ProtocolError):
                return await self._stopped(worker, cell, started, timed_out=False)
            if message.get("type") == "call":
                before = loop.time()
                reply = await self._call_host(message)
                deadline += loop.time() - before  # the host's time is not the code's
                await worker.send(reply)
                continue
            if message.get("type") != "result":
                return await self._stopped(worker, cell, started, timed_out=False)
            break
        stdout = await worker.stdout.collect(cell, _OUTPUT_GRACE_S)
        stderr = await worker.stderr.collect(cell, _OUTPUT_GRACE_S)
        duration = loop.time() - started
        error = message.get("error")
        restarted = bool(message.get("memory_exhausted"))
        if restarted:
            await worker.kill()
            await self._restart()
        return CellResult(
            stdout=stdout, stderr=stderr,
            error=clip(str(error), self.limits.output_chars) if error is not None else None,
            duration_s=duration, restarted=restarted,
            has_final_answer=bool(message.get("final")), final_answer=message.get("value"),
            citations=_cited(message.get("cite")),
        )

    async def _stopped(self, worker: WorkerProcess, cell: int, started: float, *, timed_out: bool) -> CellResult:
        """The cell did not finish: the worker timed out (killed here) or died; start a fresh one."""
        loop = asyncio.get_running_loop()
        duration = loop.time() - started
        await worker.kill(grace_s=0.0 if timed_out else 1.0)
        if timed_out:
            error = (f"TimeoutError: the cell ran longer than {self.limits.timeout_s:g} s and was stopped "
                     "(the worker was killed)")
        else:
            error = f"WorkerCrashed: {describe_exit(worker.proc.returncode, self.limits)}"
        stdout = await worker.stdout.collect(cell, 0)
        stderr = await worker.stderr.collect(cell, 0)
        await self._restart()
        return CellResult(stdout=stdout, stderr=stderr, error=error, duration_s=duration,
                          timed_out=timed_out, crashed=not timed_out, restarted=True)

    async def _call_host(self, message: Mapping[str, Any]) -> dict[str, Any]:
        name = message.get("name")
        function = self._host_functions.get(name) if isinstance(name, str) else None
        if function is None:
            return {"type": "call_result", "ok": False, "error": f"no host function {name!r}"}
        args = message.get("args")
        kwargs = message.get("kwargs")
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            return {"type": "call_result", "ok": False, "error": "malformed call"}
        try:
            value = await function(*args, **kwargs)
        except Exception as exc:  # the host function's failure is the code's to handle, as an exception
            return {"type": "call_result", "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            value = jsonable(value)
        return {"type": "call_result", "ok": True, "value": value}


def _once(variables: Mapping[str, Any], dataframes: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """The init frame's data with each list sent once: a variable or DataFrame whose list (or `listlike`
    sequence) is (the same object as) an earlier variable or one of an earlier variable's keys names where
    it is instead."""
    where: dict[int, list[str]] = {}
    sent: dict[str, Any] = {}
    aliases: dict[str, list[str]] = {}
    for name, value in variables.items():
        if listlike(value) and id(value) in where:
            aliases[name] = where[id(value)]
            continue
        sent[name] = value
        if listlike(value):
            where[id(value)] = [name]
        elif isinstance(value, Mapping):
            for key, inner in value.items():
                if isinstance(key, str) and listlike(inner):
                    where.setdefault(id(inner), [name, key])
    frames = {name: {"at": where[id(rows)]} if id(rows) in where else {"rows": rows} for name, rows in dataframes.items()}
    return {"variables": sent, "aliases": aliases, "dataframes": frames}


def _cited(value: Any) -> tuple[str, ...]:
    """`final_answer(..., cite=...)` as ids: a list of them, or one id (a string or number)."""
    if value is None:
        return ()
    items = value if isinstance(value, list | tuple) else [value]
    return tuple(str(v) for v in items if isinstance(v, str | int) and not isinstance(v, bool))


def write_frame(message: dict[str, Any], out: IO[bytes], hidden: frozenset[str] = frozenset()) -> None:
    """The worker's `encode_frame(message)` written to the binary file `out` a piece at a time: mappings
    member by member and lists item by item, each item encoded whole, so a run's records are never one
    string in memory (with its bytes and the frame, three copies of them at once). The same bytes, but that
    a mapping in a list is written without its `hidden` keys."""
    def shown(item: Any) -> Any:
        if not hidden or not isinstance(item, dict) or hidden.isdisjoint(item):
            return item
        return {k: v for k, v in item.items() if k not in hidden}

    start = out.tell()
    out.write(HEADER.pack(0))
    for piece in json_pieces(message, lambda value, top: True, each=shown):
        out.write(piece.encode("utf-8"))
    end = out.tell()
    size = end - start - HEADER.size
    if size >= 2 ** (8 * HEADER.size):
        raise ValueError(f"the sandbox's data is {size:,} bytes as JSON, more than a frame holds (4 GiB)")
    out.seek(start)
    out.write(HEADER.pack(size))
    out.seek(end)
