"""`--engine ray`: the calls go to Ray actors, each holding r3con's LLM stack built from the run's settings."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
import uuid
import zlib
from array import array
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import ray
from ray import ObjectRef
from ray.exceptions import GetTimeoutError, RayActorError

from ..config import DEFAULT_CONCURRENCY, Settings
from ..errors import ConfigError, ProviderError, R3conError
from ..llm import LLMStack, build_llm
from ..llm.transport.routing import routing_key
from ..llm.types import ChatRequest, Completion

if TYPE_CHECKING:  # a worker imports the notes' modules when it is first asked for a selection (`_round`): imported
    # as it starts, its first replies reached the driver later (the SIGTERM test failed 4 runs in 10; cause not found)
    from ..notes.selection import NoteRef, NotesQuery, NotesSelector, PackedChoice

MAX_WORKERS = 64  # actors a run starts at most, whatever the cluster's size
RESTARTS = 2  # times Ray restarts a worker whose process died; its calls in flight are sent to it again
WORKER_PREFIX = "r3con-worker-"  # the actors' names: r3con-worker-<run>-<i>
SELECT_BATCH = 256  # reads a selection batch holds at most: its reply is a few hundred small numpy arrays
SELECT_IN_FLIGHT = 2  # selection batches per worker at once: one is answered while the next crosses the wire
PUT_NOTES = 4096  # notes put in the object store as one object: about a MB
_SUMMED = ("calls", "prompt_tokens", "cached_tokens", "completion_tokens", "errors", "time_s", "documents", "taken_out")


@dataclass(frozen=True)
class _Raised:
    """An r3con error a worker's stack raised for one request, carried back to be raised on the driver."""

    error: R3conError


@dataclass(frozen=True)
class _Notes:
    """A round's notes in the object store, put there once by the driver, `PUT_NOTES` at a time (the notes of a
    large round as one object were one pickle of them all in the driver's memory): references inside this
    object, so that Ray hands them to a worker as they are (a worker reads the notes once, not on every batch)."""

    round: str  # an id of the round's selection, fresh each time
    chunks: tuple[ObjectRef, ...]  # lists of `NoteRef`s, in order: what `NotesSelector` is built from
    budget: int | None

    @classmethod
    def put(cls, refs: Sequence[NoteRef], budget: int | None) -> _Notes:
        chunks = tuple(ray.put(list(refs[at:at + PUT_NOTES])) for at in range(0, len(refs), PUT_NOTES))
        return cls(uuid.uuid4().hex, chunks, budget)


class _Worker:
    """One Ray actor: r3con's own LLM stack (retries, output checks, overflow, cache, pool), opened on first
    use; and, while the driver plans a relevance round, a notes selector over the round's notes."""

    def __init__(self, settings: Settings):
        self._settings = settings
        self._stack: LLMStack | None = None
        self._closing = AsyncExitStack()
        self._lock: asyncio.Lock | None = None
        self._selector: tuple[str, NotesSelector, int | None] | None = None  # the round's id, selector, budget

    async def select(self, notes: _Notes, queries: list[NotesQuery]) -> list[PackedChoice]:
        """The notes choices of `queries` over the round's `notes`, made as the driver would make them.

        The selector (and its index, built on the first query) is kept for the round's other batches; a
        worker that Ray restarted mid-batch has none and builds it again from the object store, which
        holds the notes while the driver waits on the round's batches."""
        selector, budget = await self._round(notes)
        return [await selector.answer(q, budget) for q in queries]

    async def forget(self, round_id: str) -> None:
        """Drop the selector of `round_id` (its round is planned): its index is not held through the calls."""
        if self._selector is not None and self._selector[0] == round_id:
            self._selector = None

    async def where(self) -> tuple[str, int]:
        """The node this worker runs on, and its process id."""
        return ray.get_runtime_context().get_node_id(), os.getpid()

    async def complete(self, request: ChatRequest) -> Completion | _Raised:
        stack = await self._open()
        try:
            return await stack.complete(request)
        except R3conError as exc:  # a document's failure, or a stop: the driver raises it as it was
            return _Raised(exc)

    async def endpoints(self) -> list[dict[str, Any]]:
        """What each endpoint of this worker's pool did ([] for one endpoint, or before the first call)."""
        return self._stack.endpoints() if self._stack is not None else []

    async def close(self) -> None:
        await self._closing.aclose()

    async def _open(self) -> LLMStack:
        async with self._locked():
            if self._stack is None:
                self._stack = await self._closing.enter_async_context(build_llm(self._settings))
        return self._stack

    async def _round(self, notes: _Notes) -> tuple[NotesSelector, int | None]:
        """The round's selector, and its budget as given (an explicit 0 leaves every note out)."""
        async with self._locked():  # a round's first batches arrive together: one builds, the others wait
            if self._selector is None or self._selector[0] != notes.round:
                self._selector = None  # the round before's, dropped before this one's notes are read
                from ..notes.selection import NotesSelector

                refs = [ref for chunk in await asyncio.gather(*notes.chunks) for ref in chunk]
                self._selector = (notes.round, NotesSelector(refs, notes.budget), notes.budget)
        return self._selector[1], self._selector[2]

    def _locked(self) -> asyncio.Lock:
        if self._lock is None:  # made on the actor's event loop, not in __init__
            self._lock = asyncio.Lock()
        return self._lock


class _Distinct:
    """Ints, counted once each (`count`): appended as they come to an array, and made distinct when they have
    doubled; a set would hold an int object and a hash entry for each of a worker's document parts."""

    def __init__(self) -> None:
        self._ints = array("q")
        self._distinct = 0  # how many of `_ints` are distinct, sorted, at their start

    def add(self, value: int) -> None:
        self._ints.append(value)
        if len(self._ints) >= 2 * self._distinct + 1024:
            self._compact()

    def count(self) -> int:
        self._compact()
        return len(self._ints)

    def _compact(self) -> None:
        distinct = np.unique(np.frombuffer(self._ints, dtype=np.int64))
        self._ints = array("q", distinct.tobytes())
        self._distinct = len(self._ints)


@dataclass
class _Tally:
    """What one worker did, as the driver saw it."""

    node: str
    pid: int
    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    lost: bool = False
    selections: int = 0  # relevance reads whose notes choice this worker made
    parts: _Distinct = field(default_factory=_Distinct)  # the document parts it answered for (`_part_id`)

    def to_dict(self, index: int) -> dict[str, Any]:
        return {"worker": index, "node": self.node, "pid": self.pid, "calls": self.calls,
                "cache_hits": self.cache_hits, "errors": self.errors, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "seconds": round(self.seconds, 3),
                "documents": self.parts.count(), "selections": self.selections, "lost": self.lost}


class RayWorkers:
    """The bottom of the driver's stack with `--engine ray`: each request goes to its document part's worker
    (the same one across rounds and stages), or to the next live one when that worker is gone for good."""

    def __init__(self, actors: list[Any], places: list[tuple[str, int]], address: str, nodes: int, cpus: float,
                 messages: _RayMessages | None = None):
        self._actors = actors
        self._tallies = [_Tally(node, pid) for node, pid in places]
        self._address, self._nodes, self._cpus = address, nodes, cpus
        self._messages = messages

    def warnings(self) -> tuple[str, ...]:
        """A line when Ray reported a worker's death during the run (it was restarted, its calls sent again)."""
        return self._messages.warnings() if self._messages is not None else ()

    @property
    def actors(self) -> list[Any]:
        return list(self._actors)

    async def complete(self, request: ChatRequest) -> Completion:
        key = routing_key(request)
        count = len(self._actors)
        start = zlib.crc32(key.encode()) % count  # stable across processes, unlike hash()
        for step in range(count):
            index = (start + step) % count
            tally = self._tallies[index]
            if tally.lost:
                continue
            began = time.perf_counter()
            try:
                outcome = await self._actors[index].complete.remote(request)
            except RayActorError:  # died and could not be restarted: its documents go to the next worker
                tally.lost = True
                continue
            tally.seconds += time.perf_counter() - began
            if request.doc is not None:
                tally.parts.add(_part_id(request.doc, request.part))
            if isinstance(outcome, _Raised):
                tally.errors += 1
                raise outcome.error
            tally.calls += 1
            tally.cache_hits += int(outcome.from_cache)
            tally.prompt_tokens += outcome.usage.prompt_tokens
            tally.completion_tokens += outcome.usage.completion_tokens
            return outcome
        raise _all_lost(count)

    async def select_many(self, refs: Sequence[NoteRef], budget: int | None, queries: Sequence[NotesQuery],
                          each: Callable[[int, PackedChoice], None] | None = None) -> list[PackedChoice]:
        """`queries`' notes choices over `refs`, made by the workers (`notes.Selects`): the notes go into the
        object store once, the queries in batches spread over the live workers, a few batches each at once.

        A worker that dies mid-batch is restarted by Ray, which sends it the batch again; one gone for good
        is left, its batch taken by the next worker free. The choices are in the order of `queries`; with
        `each`, each is handed to it as its batch comes back, and none is kept. A batch's queries are taken
        from `queries` as the batch is sent (a lazy sequence is not made whole)."""
        workers = sum(1 for t in self._tallies if not t.lost)
        size = max(1, min(SELECT_BATCH, -(-len(queries) // (SELECT_IN_FLIGHT * max(1, workers)))))
        todo = list(range(0, len(queries), size))
        todo.reverse()  # taken from the end: in order
        notes = _Notes.put(refs, budget)
        made: dict[int, list[PackedChoice]] = {}

        async def serve(index: int) -> None:  # one worker's turn: batches until none is left, or it is gone
            tally = self._tallies[index]
            while todo and not tally.lost:
                at = todo.pop()
                batch = list(queries[at:at + size])
                try:
                    choices = await self._actors[index].select.remote(notes, batch)
                except RayActorError:  # could not be restarted: the batch goes back, for another worker
                    tally.lost = True
                    todo.append(at)
                    return
                tally.selections += len(batch)
                if each is None:
                    made[at] = choices
                else:
                    for i, choice in enumerate(choices, start=at):
                        each(i, choice)

        while todo:  # again when a worker was lost after the others had found nothing left to take
            live = [i for i, t in enumerate(self._tallies) if not t.lost]
            if not live:
                raise _all_lost(len(self._actors))
            await asyncio.gather(*(serve(i) for i in live for _ in range(SELECT_IN_FLIGHT)))
        for actor, tally in zip(self._actors, self._tallies, strict=True):  # planned: the selectors can go
            if not tally.lost:
                actor.forget.remote(notes.round)
        return [choice for at in sorted(made) for choice in made[at]]

    def to_dict(self) -> dict[str, Any]:
        """The engine, the cluster's size and what each worker did: for the manifest."""
        return {"engine": "ray", "address": self._address, "nodes": self._nodes, "cpus": self._cpus,
                "workers": len(self._actors), "per_worker": [t.to_dict(i) for i, t in enumerate(self._tallies)]}

    def endpoints(self) -> list[dict[str, Any]]:
        """Per endpoint of a pool, what the workers' pools did with it, summed over the workers ([] without a pool)."""
        live = [a for a, t in zip(self._actors, self._tallies, strict=True) if not t.lost]
        try:  # at the end of a run, briefly: the workers answer from their own event loops
            reports = ray.get([a.endpoints.remote() for a in live], timeout=30)
        except (RayActorError, GetTimeoutError):
            return []
        merged: dict[str, dict[str, Any]] = {}
        for report in reports:
            for entry in report:
                into = merged.setdefault(entry["base_url"], {**entry, **dict.fromkeys(_SUMMED, 0), "out": False})
                for name in _SUMMED:
                    into[name] += entry[name]
                into["out"] = into["out"] or entry["out"]
        for entry in merged.values():
            entry["time_s"] = round(entry["time_s"], 3)
        return list(merged.values())


class _RayMessages:
    """Ray's own messages to the driver ("(raylet) A worker died or was killed ...", "Task ... failed. There are 2
    retries remaining ..."), which Ray prints on the driver's stdout even with `log_to_driver=False`: written to
    the run's log (`path`) instead, so that stdout carries only what r3con prints (`--json` stays parseable).

    Ray's listener thread calls `print_to_stdstream` by its module's name on each message; while the workers
    are up that name is this object (`routed`), and Ray's own function again after."""

    KEEP = 1000  # lines held while the run's folder does not exist yet, the oldest dropped past it

    def __init__(self, path: Path | None):
        self._path = path
        self._held: list[str] = []
        self._lock = threading.Lock()
        self.deaths = 0  # messages that say a worker died (Ray restarts it, up to `RESTARTS` times)
        self.count = 0

    def __call__(self, data: dict[str, Any], ignore_prefix: bool = False) -> None:
        lines = [str(line) for line in data.get("lines", ())]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        with self._lock:
            self.count += len(lines)
            self.deaths += sum(1 for line in lines if "worker died" in line.lower())
            self._held.extend(f"{stamp} ({data.get('pid', 'ray')}) {line}\n" for line in lines)
            del self._held[:-self.KEEP]
            self._flush()

    def _flush(self) -> None:
        if self._path is None or not self._path.parent.is_dir():
            return
        try:
            with self._path.open("a", encoding="utf-8") as fh:
                fh.writelines(self._held)
            self._held.clear()
        except OSError:  # a full disk or a removed folder: Ray's messages are not worth failing the run for
            pass

    def warnings(self) -> tuple[str, ...]:
        with self._lock:
            self._flush()
            if not self.count:
                return ()
            where = f"; Ray's messages are in {self._path}" if self._path is not None else ""
            if self.deaths:
                return (f"a Ray worker died during the run and was restarted (its calls were sent again; the "
                        f"answer is unaffected){where}",)
            return (f"Ray reported {self.count} message(s) about its workers during the run{where}",)

    @contextmanager
    def routed(self) -> Iterator[None]:
        from ray._private import worker as ray_worker  # where Ray's listener finds its printer

        printer = ray_worker.print_to_stdstream
        ray_worker.print_to_stdstream = self
        try:
            yield
        finally:
            ray_worker.print_to_stdstream = printer


def _part_id(doc: int, part: int | None) -> int:
    """A document part as one int, for counting a worker's parts: its routing key, a string, would be kept for
    every part on the driver."""
    return doc << 32 | (part or 0)  # a part number fits in 32 bits (4 billion parts of one document)


def _all_lost(count: int) -> ProviderError:
    return ProviderError(f"all {count} Ray workers were lost; check the cluster (ray status), then continue "
                         "with r3con run --resume RUN_DIR")


def _connect(settings: Settings) -> bool:
    """Join the cluster (--ray-address, else RAY_ADDRESS, else a new local one); True when this call started Ray."""
    if ray.is_initialized():  # the caller's own Ray session (a notebook, a test): use it as it is
        return False
    main = threading.current_thread() is threading.main_thread()
    sigterm = signal.getsignal(signal.SIGTERM) if main else None
    try:
        with _quiet(_NOTICES):
            ray.init(address=settings.ray_address, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.ERROR, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = settings.ray_address or os.environ.get("RAY_ADDRESS")
        left = None if where else _left_by_ray_start()
        if left:  # ray.init() joins the cluster `ray start` last started here, whether or not it still runs
            raise ConfigError(f"could not join the Ray cluster `ray start` left on this machine at {left}: {exc}; "
                              "if it was stopped, `ray stop` clears it (or pass --ray-address), or drop "
                              "--engine ray") from exc
        raise ConfigError(f"could not start or join Ray at {where or 'a local cluster'}: {exc}; check "
                          "--ray-address (or RAY_ADDRESS), or drop --engine ray") from exc
    finally:
        if main:  # ray.init sets its own SIGTERM handler: the CLI's (stop cleanly, say how to resume) stays
            signal.signal(signal.SIGTERM, sigterm)
    return True


# Ray's loggers whose warnings are notices about Ray itself, not about the run ("Token authentication is enabled
# for this Ray cluster ..." on every start): printed, they were lines in r3con's stderr a user could do nothing with
_NOTICES = ("ray._private.authentication.authentication_token_setup",)


@contextmanager
def _quiet(names: Sequence[str]) -> Iterator[None]:
    """Ray's loggers `names` at ERROR for the block (their warnings dropped), as they were after."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _left_by_ray_start() -> str | None:
    """The address of the cluster `ray start` last started on this machine (what `ray.init()` joins when
    given none), or None."""
    try:
        from ray._private.utils import read_ray_address  # Ray's own reading of its address file

        return read_ray_address() or None
    except (ImportError, OSError):
        return None


@asynccontextmanager
async def workers(settings: Settings, log: Path | None = None) -> AsyncIterator[RayWorkers]:
    """Ray workers for `settings`, one per CPU of the cluster (at most 64), closed and released at the end;
    Ray's own messages to the driver go to `log` (the run's), not to stdout."""
    messages = _RayMessages(log)
    started = _connect(settings)
    try:
        cpus = float(ray.cluster_resources().get("CPU", 1))
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        count = max(1, min(MAX_WORKERS, int(cpus)))
        # the cap, rate limits and the record of every call stay on the driver; each worker opens the endpoint
        # the driver's stack answers what was answered before (its `Answered` owns the cache, the reuse record's
        # replies and a resumed folder's): a worker only sends what is new, and keeps no second copy of it
        own = replace(settings, engine="local", max_cost_usd=None, rpm=None, tpm=None, batch=False, cache=False)
        in_flight = 4 * (settings.concurrency or DEFAULT_CONCURRENCY)
        actor: Any = ray.remote(_Worker)
        run = uuid.uuid4().hex[:8]  # named, so that `ray list actors` shows whose they are
        actors: list[Any] = [actor.options(
            name=f"{WORKER_PREFIX}{run}-{i}", num_cpus=0, max_restarts=RESTARTS, max_task_retries=RESTARTS,
            max_concurrency=in_flight, scheduling_strategy="SPREAD").remote(own) for i in range(count)]
        places = list(await asyncio.gather(*(a.where.remote() for a in actors)))
        address = ray.get_runtime_context().gcs_address
        try:
            with messages.routed():
                yield RayWorkers(actors, places, address, nodes, cpus, messages)
        finally:
            for a in actors:
                try:
                    await a.close.remote()
                except RayActorError:
                    pass
                ray.kill(a)
    finally:
        if started:
            ray.shutdown()
