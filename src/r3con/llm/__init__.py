"""The LLM seam: one `complete(request) -> completion` interface, and the layers stacked around it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from ..config import DEFAULT_CONCURRENCY, DEFAULT_CONTEXT_WINDOW, STAGES, Settings
from ..errors import ConfigError
from .cache import CallCache
from .discovery.routers import through_router
from .discovery.served import EndpointInfo
from .discovery.slots import concurrency_for
from .identity import model_identity
from .layers.accounting import Ledger
from .layers.answered import Answered
from .layers.budget import CostCap, check_prices, shared_cap
from .layers.calllog import CallLog, LogSummary
from .layers.nearwindow import NearWindow
from .layers.replay import LoggedReplies
from .layers.retry import Retrier, RetryBudget, RetryPolicy
from .pricing import Price, PriceTable
from .stack import Layer, Parts, Wrap, Wrapper, assemble, layers
from .transport.batch import Batched
from .transport.client import OpenAIChat, request_headers
from .transport.embeddings import Embedder, open_embedder
from .transport.liveness import Liveness, Watched
from .transport.pool import EndpointStats, Pooled, open_pool, pool_entries
from .types import LLM, ChatRequest, Completion, Message, Usage
from .window import Window

__all__ = [
    "LLM", "ChatRequest", "Completion", "CostCap", "EndpointInfo", "EndpointStats", "EndpointView", "LLMStack", "Ledger",
    "Layer", "Message", "Price", "PriceTable", "Remote", "Usage", "Wrapper", "build_llm", "request_headers",
]


class Remote(Protocol):
    """Workers that answer the seam's requests with stacks of their own (`engine`), and say what each did."""

    async def complete(self, request: ChatRequest) -> Completion: ...

    def to_dict(self) -> dict[str, Any]: ...

    def endpoints(self) -> list[dict[str, Any]]: ...

    def warnings(self) -> tuple[str, ...]: ...


@dataclass
class LLMStack:
    """The assembled client a run uses: call `complete`; read `ledger` and `endpoint`."""

    top: LLM
    ledger: Ledger
    endpoint: EndpointInfo
    log: CallLog = field(default_factory=lambda: CallLog(None))  # the run's calls.jsonl, for other clients too
    retrier: Retrier | None = None  # the run's retry policy and budget, for other clients too
    cost_cap: CostCap | None = None  # --max-cost, for other clients too
    cache: CallCache | None = None  # the LLM cache, for embeddings too
    answered: Answered | None = None  # the one owner of replies given before: earlier runs', the cache's, a folder's
    pool: Pooled | None = None  # the endpoints of a pool (`--base-url` repeated or `--pool`), else None
    near_window: NearWindow | None = None  # counts prompts close to a window the server did not report
    window: Window | None = None  # the window's one owner: as reported, learned from "too long" replies, kept
    concurrency: tuple[int, str] | None = None  # requests in flight, and where the number came from (`slots`)
    _closing: ExitStack = field(default_factory=ExitStack, repr=False)  # what the stack opened, closed with it
    engine: Remote | None = None  # the workers the calls go to (`--engine ray`), else None: this process sends them
    layers: tuple[str, ...] = ()  # the layers' names, top to bottom (`stack.layers`)

    @property
    def planning_window(self) -> int:
        """The window to plan parts and notes in: the endpoint's, or less when the server said so."""
        return self.endpoint.context_window if self.window is None else self.window.planning

    def remember_answered(self) -> None:
        """Serve again what this run's call log holds (after a re-plan: the calls answered before it whose
        requests are unchanged are not paid again, with the cache off too)."""
        if self.answered is None or self.log.path is None:
            return
        replies = LoggedReplies(self.log.path)
        self._closing.callback(replies.close)
        self.answered.folder = replies.get

    def endpoints(self) -> list[dict[str, object]]:
        """Per endpoint of a pool: calls, tokens, errors, time, documents served ([] for one endpoint)."""
        if self.engine is not None and self.pool is not None:  # the calls went from the workers' pools
            merged = self.engine.endpoints()
            if merged:  # else no worker has opened its pool yet: the pool as this process found it
                return merged
        return [s.to_dict() for s in self.pool.stats()] if self.pool is not None else []

    @property
    def view(self) -> EndpointView:
        """What a run reads of this stack (`EndpointView`)."""
        return EndpointView(self)

    def warnings(self) -> tuple[str, ...]:
        """What the run should warn about once it ends (prompts close to an unreported window, a worker restarted)."""
        line = self.near_window.warning() if self.near_window is not None else None
        return ((line,) if line else ()) + (self.engine.warnings() if self.engine is not None else ())

    async def complete(self, request: ChatRequest) -> Completion:
        return await self.top.complete(request)

    def embedder(self, settings: Settings, stage: str) -> AbstractAsyncContextManager[Embedder | None]:
        """The configured embedder (None without an embedding model), sharing this run's ledger, log, retries and cap."""
        return open_embedder(settings, stage=stage, ledger=self.ledger, log=self.log, retrier=self.retrier,
                             cap=self.cost_cap, cache=self.cache)


class EndpointView:
    """What a run needs to know of its endpoint, read-only: the endpoint and its window as learned, the
    usage so far, the warnings; and two things it may tell it: events a stage counted (re-asks, repairs)
    and a listener for usage and for the waits the layers announce."""

    def __init__(self, stack: LLMStack):
        self._stack = stack

    @property
    def endpoint(self) -> EndpointInfo:
        return self._stack.endpoint

    @property
    def planning_window(self) -> int:
        return self._stack.planning_window

    def describe(self) -> dict[str, Any]:
        """The manifest's `endpoint`: URL, model, window and where it came from, requests in flight and where
        that number came from (--concurrency, the server's slots, the default), a pool's endpoints."""
        stack, info = self._stack, self._stack.endpoint
        window = stack.window or Window(info)  # the window's one owner says what it was configured or reported as
        out: dict[str, Any] = {"base_url": info.base_url, "model": info.model, "context_window": window.reported,
                               "context_window_source": window.source}
        if stack.concurrency:
            out.update(concurrency=stack.concurrency[0], concurrency_source=stack.concurrency[1])
        if stack.pool is not None:
            out.update(pool=stack.endpoints(), unreachable=list(stack.pool.unreachable))
        return out

    def learned_window(self) -> dict[str, object] | None:
        """What "too long" replies taught of the window (`Window.to_dict`), or None."""
        window = self._stack.window
        return window.to_dict() if window is not None and window.learned else None

    def usage(self) -> Usage:
        return self._stack.ledger.total()

    def usage_by_stage(self) -> dict[str, Usage]:
        return self._stack.ledger.by_stage()

    def calls_logged(self) -> LogSummary:
        """The run folder's calls.jsonl as written so far, earlier attempts' included: cost, count, timing."""
        return self._stack.log.summary()

    def endpoints(self) -> list[dict[str, object]] | None:
        """Per endpoint of a pool (None for one endpoint)."""
        return self._stack.endpoints() if self._stack.pool is not None else None

    def warnings(self) -> tuple[str, ...]:
        return self._stack.warnings()

    def engine(self) -> dict[str, Any] | None:
        """`--engine ray`: the cluster and what each worker did; None when this process sent the calls."""
        return self._stack.engine.to_dict() if self._stack.engine is not None else None

    def count(self, stage: str, events: dict[str, int]) -> None:
        """Events a stage counted outside the calls (schema re-asks, repaired JSON)."""
        self._stack.ledger.add(stage, Usage(events=events))

    def listen(self, on_usage: Callable[[Usage], None], on_wait: Callable[[str], None] | None = None) -> None:
        """`on_usage(total)` after each call; `on_wait(line)` when the layers wait (a rate limit, an outage)."""
        ledger = self._stack.ledger
        ledger.subscribe(lambda stage, usage: on_usage(ledger.total()))
        if on_wait is not None and self._stack.retrier is not None:
            self._stack.retrier.subscribe(on_wait)
        if on_wait is not None and self._stack.pool is not None:  # an endpoint taken out, and when it is tried
            self._stack.pool.subscribe(on_wait)


@asynccontextmanager
async def build_llm(settings: Settings, calls_log: Path | None = None, *,
                    cap: CostCap | None = None, model: LLM | None = None,
                    remote: Remote | None = None, layers: Sequence[Wrap] = ()) -> AsyncIterator[LLMStack]:
    """Open the endpoint, learn its model and window, and stack the layers (`stack.layers`).

    Top to bottom: `Shaped` (the stage's model, the reply cap, the window: the request as it will be
    sent), the user's `layers`, the call log, accounting, `Answered` (the one owner of replies given
    before: an earlier run's, the cache's, a resumed folder's; the fingerprint is taken here), output
    checks, retries, what "too long" replies teach of the window (`overflow`), rate and concurrency
    limits, the spending cap (only calls in flight reserve against it), the HTTP client (watched for a
    wedge: `liveness`).
    `layers`: a user's layers (`Wrapper` subclasses, or any callable that takes the layer below and returns
    a layer), stacked just below `Shaped` in the order given, the first outermost.
    `cap`: a `CostCap` shared with other stacks (an evaluation's; or the one of an enclosing
    `budget.sharing(cap)`); without one, `--max-cost` makes one that counts what earlier attempts
    logged in `calls_log` (a resumed run folder).
    `model`: any object with the `LLM` protocol (`complete(request) -> completion`) in place of the HTTP
    endpoint, wrapped in the same layers; its name and window come from `settings.model` and
    `settings.context_window` (defaults: "custom" and 32,768 tokens); the cache keeps its replies under the
    `version` it declares, else a digest of its code, else not at all (`identity`).
    `remote`: workers that each hold a stack of their own built from the same settings (`engine`): the
    calls go to them below the rate and concurrency limits, and the layers the workers apply (output
    checks, retries, the cache) are not stacked here again; the endpoint is still opened here, to learn
    its model and window.
    """
    closing = ExitStack()
    opened = await _open(settings, model)
    try:
        yield _stack(settings, opened, calls_log, cap, closing, remote, layers)
    finally:
        closing.close()
        if opened.close is not None:
            await opened.close()


@dataclass(frozen=True)
class _Opened:
    """The bottom of a stack: what answers, what it said of itself, how many calls it takes at once."""

    base: LLM
    endpoint: EndpointInfo
    concurrency: tuple[int, str]
    pool: Pooled | None = None
    chat: OpenAIChat | None = None  # one HTTP endpoint (the Batch API needs it)
    close: Callable[[], Awaitable[None]] | None = None
    # what the LLM cache knows the answerer by: the endpoint's URL, or a user's model's declared version or code
    # (`identity`); None: a user's model with neither, whose replies are not cached
    identity: str | None = None
    users_model: bool = False


async def _open(settings: Settings, model: LLM | None) -> _Opened:
    """The user's `model`, a pool of endpoints, or one endpoint (behind a router, its workers' window)."""
    if model is not None:
        window = settings.context_window or DEFAULT_CONTEXT_WINDOW
        info = EndpointInfo("", settings.model or "custom", window,
                            "config" if settings.context_window else "default")
        return _Opened(model, info, (settings.concurrency or DEFAULT_CONCURRENCY, "the model given"),
                       identity=model_identity(model), users_model=True)
    entries = pool_entries(settings)
    if entries:
        pool = await open_pool(settings, entries)  # each endpoint's window discovered as for one
        return _Opened(pool, pool.info(), (sum(s.concurrency for s in pool.stats()), "pool: each endpoint's own"),
                       pool=pool, close=pool.aclose, identity=pool.info().base_url)
    chat = OpenAIChat(settings)
    try:
        endpoint = await through_router(chat.endpoint, settings, await chat.describe(settings))
        concurrency = await concurrency_for(chat.endpoint, settings)
    except BaseException:
        await chat.aclose()
        raise
    # a call held without a word by a server that answers no probe is cancelled and waited out as an outage
    liveness = Liveness(chat.probe, first_byte_s=settings.first_byte_s, probe_timeout_s=settings.probe_timeout_s)
    return _Opened(Watched(chat, liveness, chat.base_url), endpoint, concurrency, chat=chat, close=chat.aclose,
                   identity=endpoint.base_url)


def _stack(settings: Settings, opened: _Opened, calls_log: Path | None, cap: CostCap | None,
           closing: ExitStack, remote: Remote | None = None, user: Sequence[Wrap] = ()) -> LLMStack:
    """The layers over `opened.base` (or the `remote` workers), top to bottom as `stack.layers` lists them."""
    parts = _parts(settings, opened, calls_log, cap, closing, remote)
    bottom: LLM = opened.base if remote is None else remote
    if parts.batch and opened.chat is not None:  # --batch: calls gather into Batch API jobs
        bottom = Batched(opened.chat, settings.out_dir / "batches.json", poll_s=settings.batch_poll_s,
                         concurrency=parts.concurrency)
    listed = layers(parts, user)
    top, built = assemble(bottom, listed)
    answered, near = cast(Answered, built["answered"]), cast("NearWindow | None", built.get("near window"))
    return LLMStack(top=top, ledger=parts.ledger, endpoint=opened.endpoint, log=parts.log, retrier=parts.retrier,
                    cost_cap=parts.cap, cache=parts.cache_file, answered=answered, pool=opened.pool,
                    near_window=near, window=parts.window, concurrency=opened.concurrency, engine=remote,
                    layers=tuple(layer.name for layer in listed), _closing=closing)


def _parts(settings: Settings, opened: _Opened, calls_log: Path | None, cap: CostCap | None,
           closing: ExitStack, remote: Remote | None) -> Parts:
    """What the layers share, opened once (what needs closing closes with `closing`)."""
    endpoint = opened.endpoint
    prices = PriceTable.load(settings.prices_file, base_url=endpoint.base_url)
    log = CallLog(calls_log, detail=settings.log_calls)  # a resumed folder's earlier calls read once, here
    closing.callback(log.close)
    cap = cap or shared_cap()
    if cap is None and settings.max_cost_usd is not None:
        cap = CostCap(settings.max_cost_usd, spent_before=log.summary().usd)
        if cap.spent_usd >= cap.limit_usd:
            raise ConfigError(
                f"this run folder already spent ${cap.spent_usd:.4f}, which --max-cost ${cap.limit_usd:.4f} "
                "does not exceed; raise --max-cost above what was spent to continue it")
    pool = opened.pool
    default = pool.request_model or endpoint.model if pool is not None else endpoint.model
    models_of = pool.models_of if pool is not None else (lambda model: (model,))
    if cap is not None:
        check_prices(prices, [m for s in STAGES for m in models_of(settings.model_for(s) or default)])
    window = Window(endpoint)
    budget = RetryBudget(settings.retry_budget)
    policy = RetryPolicy(settings.retries, settings.retry_base_s, settings.retry_max_s, settings.max_call_s,
                         settings.outage_s)
    replies = LoggedReplies(calls_log)  # a resumed folder's answered calls: never paid twice, cache or not
    closing.callback(replies.close)
    cache: CallCache | None = None
    if settings.cache and settings.cache_path is not None:
        cache = CallCache(settings.cache_path)
        closing.callback(cache.close)
        window.recall(cache)  # what an earlier run against this endpoint and model learned of its window
        closing.callback(window.keep, cache)  # before the cache closes (callbacks run last first)
    return Parts(settings=settings, default_model=default, concurrency=opened.concurrency[0], prices=prices, log=log,
                 ledger=Ledger(), window=window, retry_budget=budget,
                 retrier=Retrier(policy, budget, endpoint.base_url), cap=cap, models_of=models_of,
                 cache=cache if opened.identity is not None else None, cache_file=cache,
                 answerer=opened.identity or "", users_model=opened.users_model,
                 folder=replies.get if len(replies) else None, remote=remote is not None,
                 batch=settings.batch and opened.chat is not None and remote is None)
