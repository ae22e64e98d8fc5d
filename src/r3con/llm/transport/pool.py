"""A pool of endpoints under the LLM seam: document affinity balanced by load, failover, per-endpoint accounting.

`--base-url` repeated, R3CON_BASE_URLS or a pool file (`--pool`) name several OpenAI-compatible
endpoints (replicas of one model, usually). `Pooled` takes the place of the one HTTP client at the
bottom of the stack; the layers above (retries, output checks, cache, accounting) see one endpoint.

- Affinity: every call about one document part (`routing.routing_key`) goes to one endpoint, so that
  endpoint's prefix cache sees the part's prefix on every round and in population. The endpoint is
  chosen by weighted rendezvous hashing of the key, bounded by load: a key goes to the first endpoint
  in its rendezvous order that holds fewer than `LOAD_BOUND` times its weighted share of the keys
  placed so far (consistent hashing with bounded loads), and then stays there.
- Failover: an endpoint that gives no reply (refused, dropped, timed out) or `FIVE_XX_STREAK` 5xx
  replies in a row is taken out; its keys move to the others when their next call comes; the call
  that failed is sent to another endpoint at once (answered calls are never sent again). It is tried
  again after `OUT_S` seconds, doubling up to `OUT_MAX_S` each time it fails again, and then only once a
  liveness probe (GET /models, `probe_timeout_s`) answers: a probe, never a real call, finds whether it is back.
  Calls queued for an endpoint that is taken out move at once, without waiting for its slots.
- Wedged endpoints (a process stopped with SIGSTOP, a hung GPU: connections accepted, nothing answered): each
  endpoint's `liveness.Liveness` watches its calls; a call that has had no reply for `first_byte_s` seconds
  (R3CON_FIRST_BYTE_S, default 15) has its endpoint probed; an endpoint that does not answer the probe within
  `probe_timeout_s` is lost, so taken out, and every call it holds moves at once. A busy endpoint answers the
  probe, and its calls keep waiting (up to `--timeout`). (One endpoint alone is watched the same way, and waits
  out a lost endpoint as an outage: `liveness.Watched`.)
- Windows: each endpoint's window is discovered as for one; the pool plans for the smallest, so every
  part and prompt fits every endpoint and a document can move anywhere on failover.
- Accounting: `stats()` gives, per endpoint, its calls, tokens, errors, time and documents served.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import math
import os
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...config import Settings, check_base_url, same_endpoint
from ...errors import ConfigError, ProviderError
from ..discovery.routers import through_router
from ..discovery.served import EndpointInfo, discover
from ..discovery.slots import concurrency_for
from ..layers.retry import retryable
from ..types import ChatRequest, Completion
from .client import OpenAIChat
from .endpoint import Account, Endpoint
from .liveness import Liveness, Silent
from .routing import SHARED_KEY, routing_key

LOAD_BOUND = 1.25  # a key's endpoint holds at most this times its weighted share of the keys placed
FIVE_XX_STREAK = 3  # 5xx replies in a row that take an endpoint out
OUT_S = 5.0  # seconds an endpoint stays out the first time; doubled each time it fails again
OUT_MAX_S = 120.0
_FIELDS = {"url", "key", "key_env", "model", "weight", "concurrency"}


@dataclass(frozen=True)
class PoolEntry:
    """One endpoint of the pool as configured: its URL, API key, model, weight and concurrency."""

    url: str
    api_key: str | None = None
    model: str | None = None
    weight: float = 1.0
    concurrency: int | None = None  # None: --concurrency


def pool_entries(settings: Settings, env: dict[str, str] | None = None) -> tuple[PoolEntry, ...]:
    """The endpoints of the pool (`--pool` file, else `--base-url` repeated / R3CON_BASE_URLS); () for one endpoint."""
    if settings.pool_file is not None:
        return read_pool_file(settings.pool_file, env)
    if len(settings.base_urls) > 1:
        return tuple(PoolEntry(check_base_url(url)) for url in settings.base_urls)
    return ()


def read_pool_file(path: Path, env: dict[str, str] | None = None) -> tuple[PoolEntry, ...]:
    """The endpoints of a pool file: TOML (`[[endpoint]]` tables) or JSON (`{"endpoint": [...]}`); `key_env` names
    a variable of `env` (default: the process environment, read when the pool opens) that holds the key."""
    env = dict(os.environ) if env is None else env
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--pool {path}: cannot read it ({exc.strerror or exc}); pass a TOML or JSON pool file") from exc
    try:
        data: Any = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"--pool {path} is not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from exc
    rows = data.get("endpoint") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ConfigError(f"--pool {path} lists no endpoint; give one [[endpoint]] table per server, each with a url")
    entries = []
    for i, row in enumerate(rows, start=1):
        where = f"--pool {path}, endpoint {i}"
        if not isinstance(row, dict) or not isinstance(row.get("url"), str):
            raise ConfigError(f"{where} has no url; give each endpoint url = \"http://host:port/v1\"")
        unknown = sorted(set(row) - _FIELDS)
        if unknown:
            raise ConfigError(f"{where} has unknown field(s) {', '.join(unknown)}; use {', '.join(sorted(_FIELDS))}")
        key = row.get("key")
        if row.get("key_env"):
            key = env.get(str(row["key_env"]))
            if not key:
                raise ConfigError(f"{where}: the variable {row['key_env']} named by key_env is not set")
        weight, concurrency = row.get("weight", 1.0), row.get("concurrency")
        if not isinstance(weight, int | float) or isinstance(weight, bool) or not (math.isfinite(weight) and weight > 0):
            raise ConfigError(f"{where}: weight = {weight!r} cannot work; give a finite number above 0, such as 1 "
                              "(twice another's weight: twice its documents)")
        if concurrency is not None and (not isinstance(concurrency, int) or isinstance(concurrency, bool)
                                        or concurrency < 1):
            raise ConfigError(f"{where}: concurrency must be a whole number of at least 1 (it was {concurrency!r})")
        entries.append(PoolEntry(check_base_url(row["url"]), api_key=key, model=row.get("model"), weight=float(weight),
                                 concurrency=concurrency))
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries, start=1):
        first = seen.setdefault(same_endpoint(entry.url), i)
        if first != i:
            raise ConfigError(f"--pool {path}: endpoint {i} ({entry.url}) is endpoint {first} again (the same server "
                              "however written); list each URL once")
    return tuple(entries)


@dataclass(frozen=True)
class EndpointStats:
    """What one endpoint of the pool did in a run."""

    base_url: str
    model: str
    context_window: int
    weight: float
    concurrency: int
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    errors: int = 0
    time_s: float = 0.0
    documents: int = 0  # document parts it answered at least one call about (calls about none not counted)
    taken_out: int = 0  # times it was taken out of the pool
    out: bool = False  # whether it was out when the stats were read: taken out and not answered since

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["time_s"] = round(self.time_s, 3)
        return out


class _Member:
    """One endpoint of the pool and its state: the client, its limit, its keys, whether it is out."""

    def __init__(self, entry: PoolEntry, chat: OpenAIChat, info: EndpointInfo, concurrency: int):
        self.entry, self.chat, self.info, self.concurrency = entry, chat, info, concurrency
        self.semaphore = asyncio.Semaphore(concurrency)
        # whether it answers (`liveness`): lost, it is taken out, and its calls, held or queued, wake and move
        self.liveness = Liveness(getattr(chat, "probe", None))
        self.keys = 0  # keys placed here
        self.stats = EndpointStats(entry.url, info.model, info.context_window, entry.weight, concurrency)
        self.served: set[str] = set()
        self.out_until = 0.0
        self.out_s = OUT_S
        self.streak = 0  # 5xx replies in a row

    def score(self, key: str) -> float:
        """Weighted rendezvous score of `key` here (highest wins): -weight / ln(h), h uniform in (0, 1)."""
        digest = hashlib.sha256(f"{self.entry.url}\x00{key}".encode()).digest()
        h = (int.from_bytes(digest[:8], "big") + 1) / (2**64 + 2)
        return -self.entry.weight / math.log(h)


class Pooled:
    """The bottom of the stack for a pool: each call goes to its document's endpoint, or another if that one is out."""

    def __init__(self, members: Sequence[_Member], *, unreachable: Sequence[str] = (),
                 clock: Callable[[], float] = time.monotonic, first_byte_s: float = 15.0, probe_timeout_s: float = 5.0):
        self._members = list(members)
        for member in self._members:
            member.liveness = Liveness(getattr(member.chat, "probe", None), first_byte_s=first_byte_s,
                                       probe_timeout_s=probe_timeout_s, clock=clock)
            member.liveness.subscribe(functools.partial(self._left, member))
        self._listeners: list[Callable[[str], None]] = []
        self.unreachable = tuple(unreachable)  # endpoints that did not answer when the pool opened, and why
        self._home: dict[str, _Member] = {}
        self._clock = clock
        # the LLM cache's endpoint identity: the models served, so a run resumed over other replicas of them
        # finds the answers it had
        models = sorted({m.entry.model or m.info.model for m in self._members})
        self.base_url = "pool:" + ",".join(models)
        # what a request for the pool's default model names when its endpoints serve different models: every
        # model that may answer it, so that changing one changes the request's fingerprint (resume, reuse)
        self.request_model = self.base_url if len(models) > 1 else None
        self._models = tuple(models)

    def models_of(self, model: str) -> tuple[str, ...]:
        """The models that may answer a request naming `model`: each endpoint's for `request_model`."""
        return self._models if self.request_model is not None and model == self.request_model else (model,)

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """`listener(line)` hears each time an endpoint is taken out: why, and when it is asked again."""
        self._listeners.append(listener)

    async def aclose(self) -> None:
        for member in self._members:
            await member.chat.aclose()

    def info(self) -> EndpointInfo:
        """The pool as one endpoint: the first endpoint's model and the smallest window (see the module's doc)."""
        smallest = min(self._members, key=lambda m: m.info.context_window)
        windows = sorted({m.info.context_window for m in self._members})
        source = f"pool: the smallest of {len(self._members)} endpoints' windows ({smallest.info.context_window_source})"
        if len(windows) > 1:
            source += f"; theirs: {', '.join(map(str, windows))}"
        first = self._members[0].info
        return EndpointInfo(first.base_url, first.model, smallest.info.context_window, source)

    def stats(self) -> tuple[EndpointStats, ...]:
        return tuple(replace(m.stats, documents=len(m.served - {SHARED_KEY})) for m in self._members)

    def served(self) -> dict[str, frozenset[str]]:
        """The routing keys each endpoint answered at least one call about."""
        return {m.entry.url: frozenset(m.served) for m in self._members}

    def endpoint_for(self, key: str) -> _Member | None:
        """The endpoint of `key`: where it was placed if that endpoint is in, else the first in its rendezvous
        order (among those in) below its load bound; None when every endpoint is out."""
        now = self._clock()
        home = self._home.get(key)
        if home is not None and home.out_until <= now:
            return home
        live = [m for m in self._members if m.out_until <= now]
        if not live:
            return None
        placed = sum(m.keys for m in live) + 1
        total_weight = sum(m.entry.weight for m in live)
        ranked = sorted(live, key=lambda m: m.score(key), reverse=True)
        chosen = next((m for m in ranked if m.keys < math.ceil(LOAD_BOUND * placed * m.entry.weight / total_weight)),
                      ranked[0])
        if home is not None:
            home.keys -= 1
        chosen.keys += 1
        self._home[key] = chosen
        return chosen

    async def complete(self, request: ChatRequest) -> Completion:
        key = routing_key(request)
        failed_over = 0
        while True:
            member = self.endpoint_for(key)
            if member is None:
                back = min(m.out_until for m in self._members) - self._clock()
                raise ProviderError(f"{self.base_url}: every endpoint of the pool is out (refused, timed out or "
                                    f"failing); the first is tried again in {max(back, 0):.0f} s",
                                    endpoint=self.base_url, retry_after=max(back, 0.0))
            if member.liveness.doubted and not await self._alive(member):
                continue  # let back in by the clock, but its probe was not answered: out again, ask another
            if not await self._enter(member):
                failed_over += 1  # taken out while the call waited for one of its slots: it moves at once
                continue
            started = time.perf_counter()
            try:
                completion = await member.liveness.watched(member.chat.complete(self._for(member, request)))
            except ProviderError as failure:
                self._failed(member, failure, time.perf_counter() - started)
                if member.out_until <= self._clock():
                    raise
                failed_over += 1  # taken out: the call goes to another endpoint now
                continue
            except Silent:  # it stopped answering while it held the call: the call moves
                failed_over += 1
                continue
            finally:
                member.semaphore.release()
            self._answered(member, key, completion, time.perf_counter() - started)
            if failed_over:
                completion = replace(completion, usage=completion.usage.with_event("failovers", failed_over))
            return completion

    async def _enter(self, member: _Member) -> bool:
        """Take one of `member`'s slots; False (none taken) if it is taken out while the call waits for one."""
        if not member.semaphore.locked():
            await member.semaphore.acquire()
            return True
        gone = member.liveness.gone
        slot = asyncio.ensure_future(member.semaphore.acquire())
        left = asyncio.ensure_future(gone.wait())
        try:
            await asyncio.wait({slot, left}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled while waiting: a slot it got is given back
            if slot.done() and not slot.cancelled():
                member.semaphore.release()
            raise
        finally:
            left.cancel()
            if not slot.done():
                slot.cancel()
        if slot.done() and not slot.cancelled():
            if member.out_until > self._clock():  # got a slot, but the endpoint is out now: give it back
                member.semaphore.release()
                return False
            return True
        return False

    async def _alive(self, member: _Member) -> bool:
        """Whether `member` is in and answers a liveness probe (`Liveness.alive`); one that does not is taken out."""
        if member.out_until > self._clock():
            return False  # another call's probe (or failure) took it out already
        return await member.liveness.alive()

    def _for(self, member: _Member, request: ChatRequest) -> ChatRequest:
        """`request` with the endpoint's own model (its pool entry's, or the one it serves) where the stage asked the
        pool's default model."""
        own = member.entry.model or member.info.model
        if own != request.model and request.model in (None, self._members[0].info.model, self.request_model):
            return request.with_model(own)
        return request

    def _answered(self, member: _Member, key: str, completion: Completion, elapsed: float) -> None:
        u = completion.usage
        member.stats = replace(member.stats, calls=member.stats.calls + u.calls,
                               prompt_tokens=member.stats.prompt_tokens + u.prompt_tokens,
                               cached_tokens=member.stats.cached_tokens + u.cached_tokens,
                               completion_tokens=member.stats.completion_tokens + u.completion_tokens,
                               time_s=member.stats.time_s + elapsed)
        member.served.add(key)
        member.stats = replace(member.stats, out=False)
        member.streak = 0
        member.out_s = OUT_S

    def _failed(self, member: _Member, exc: ProviderError, elapsed: float) -> None:
        member.stats = replace(member.stats, errors=member.stats.errors + 1, time_s=member.stats.time_s + elapsed)
        if not retryable(exc) or exc.status in (408, 409, 429):
            return  # the request's own fault, or the endpoint asks to slow down: not a reason to leave
        if exc.status is not None:
            member.streak += 1
            if member.streak < FIVE_XX_STREAK:
                return
        self._take_out(member, f"no reply ({str(exc)[:160]})" if exc.status is None else f"{FIVE_XX_STREAK} HTTP 5xx in a row")

    def _take_out(self, member: _Member, why: str) -> None:
        """Lost (`Liveness.lost`): its calls wake and move, and the pool leaves it for its time out (`_left`)."""
        if member.out_until <= self._clock():
            member.liveness.lost(why)

    def _left(self, member: _Member, why: str) -> None:
        """Out for its time out (doubling each time), its keys free to move (its `Liveness` heard it lost)."""
        if member.out_until > self._clock():
            return  # already out (another call saw it first)
        member.out_until = self._clock() + member.out_s
        member.out_s = min(member.out_s * 2, OUT_MAX_S)
        member.streak = 0
        member.stats = replace(member.stats, taken_out=member.stats.taken_out + 1, out=True)
        until = time.strftime("%H:%M:%S", time.localtime(time.time() + member.out_until - self._clock()))
        line = (f"pool: {member.entry.url} is out: {why}; its calls move to the other endpoints; a probe asks "
                f"whether it is back from {until}")
        for listener in list(self._listeners):
            listener(line)
        for key, home in list(self._home.items()):  # its keys move when their next call comes
            if home is member:
                del self._home[key]
                member.keys -= 1


async def open_pool(settings: Settings, entries: Sequence[PoolEntry]) -> Pooled:
    """Each endpoint's client, model and window (discovered as for one), as a `Pooled`; ConfigError if none answers."""
    timeout = min(settings.request_timeout_s, settings.max_call_s)
    chats = [OpenAIChat(replace(settings, model=e.model or settings.model),
                        Endpoint(e.url, Account(e.api_key if e.api_key is not None else settings.api_key,
                                                settings.organization, settings.project), timeout_s=timeout))
             for e in entries]
    async def describe(chat: OpenAIChat, entry: PoolEntry) -> EndpointInfo:
        own = replace(settings, model=entry.model or settings.model)
        return await through_router(chat.endpoint, own, await discover(chat.endpoint, own))

    infos = await asyncio.gather(*(describe(chat, e) for chat, e in zip(chats, entries, strict=True)),
                                 return_exceptions=True)
    members, problems = [], []
    for entry, chat, info in zip(entries, chats, infos, strict=True):
        if isinstance(info, ConfigError | ProviderError):  # left out, and listed
            problems.append(str(info))
        elif not isinstance(info, BaseException):
            slots = entry.concurrency or (await concurrency_for(chat.endpoint, settings))[0]  # its own slots
            members.append(_Member(entry, chat, info, slots))
            continue
        await chat.aclose()
    unexpected = next((i for i in infos if isinstance(i, BaseException) and not isinstance(i, ConfigError | ProviderError)),
                      None)
    if unexpected is not None or not members:
        for member in members:
            await member.chat.aclose()
        if unexpected is not None:
            raise unexpected
        raise ConfigError(f"no endpoint of the pool answers: {'; '.join(problems)}")
    return Pooled(members, unreachable=problems, first_byte_s=settings.first_byte_s,
                  probe_timeout_s=settings.probe_timeout_s)
