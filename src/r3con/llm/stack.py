"""The LLM stack as data: an ordered list of layers, each a name and how it wraps the layer below it.

`build_llm` builds the pieces the layers share once (`Parts`: the call log, the ledger, the window, the
retry budget, the cache...), lists the layers these settings use (`layers`), and wraps them around what
answers (`assemble`). A user adds a layer by subclassing `Wrapper` (or passing any callable that takes the
layer below and returns a layer) in `build_llm(..., layers=[...])`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..config import Settings
from .cache import CallCache
from .layers.accounting import Accounted, Ledger
from .layers.answered import Answered
from .layers.budget import BudgetGuard, CostCap
from .layers.calllog import CallLog, Recorded
from .layers.limits import ConcurrencyLimited, RateLimited
from .layers.nearwindow import NearWindow
from .layers.output import OutputChecked
from .layers.overflow import Overflows
from .layers.retry import Retrier, RetryBudget, Retrying
from .layers.shaped import Shaped
from .pricing import PriceTable
from .types import LLM, ChatRequest, Completion
from .window import Window

Wrap = Callable[[LLM], LLM]  # the layer below -> the layer


class Wrapper:
    """A layer of the LLM stack: subclass it, override `complete`, and call `self.inner.complete(request)` to
    ask the layers below (as pydantic-ai's `WrapperModel`, or an httpx transport around another).

    Give the class (or any callable that takes the layer below and returns a layer) to
    `build_llm(..., layers=[...])`. A user's layers sit just below `Shaped`, in the order given (the first
    outermost): each sees a request as it will be sent (the stage's model, the reply cap and the window
    applied) and every reply, the cache's too (`completion.from_cache`); what it changes of a request is
    what the call log records and the cache keys on."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner

    async def complete(self, request: ChatRequest) -> Completion:
        return await self.inner.complete(request)


@dataclass(frozen=True)
class Layer:
    """One entry of the stack: its name, how it wraps the layer below, and whether these settings use it."""

    name: str
    wrap: Wrap
    used: bool = True


@dataclass(frozen=True)
class Parts:
    """What the layers share, built once from the settings (`build_llm`) and handed to the layers that need it."""

    settings: Settings
    default_model: str  # the model a request that names none (and whose stage has none) is sent to
    concurrency: int  # requests in flight
    prices: PriceTable
    log: CallLog
    ledger: Ledger
    window: Window
    retry_budget: RetryBudget
    retrier: Retrier
    cap: CostCap | None  # --max-cost, or an enclosing evaluation's cap
    models_of: Callable[[str], tuple[str, ...]]  # the models a request's model may reach (a pool's routes)
    cache: CallCache | None  # where replies are kept (None: off, or a user's model that cannot be told apart)
    cache_file: CallCache | None  # the LLM cache, open for the window and embeddings too
    answerer: str  # what the cache knows the answerer by: a URL, or a user's model's identity (`identity`)
    users_model: bool
    folder: Callable[[str], Completion | None] | None  # a resumed folder's replies, by request fingerprint
    remote: bool  # workers hold stacks of their own (`engine`): they check the output and retry
    batch: bool  # --batch: calls go out as Batch API jobs, all of a job's calls in flight together


def layers(p: Parts, user: Sequence[Wrap] = ()) -> list[Layer]:
    """The stack these settings build, top to bottom (the layers it does not use left out)."""
    s, cap = p.settings, p.cap
    listed = [
        Layer("shaped", lambda llm: Shaped(llm, s.model_for, p.default_model, max_tokens_cap=s.max_tokens_cap,
                                           window=p.window)),
        *(Layer(f"user: {_named(wrap)}", wrap) for wrap in user),
        Layer("recorded", lambda llm: Recorded(llm, p.log)),
        Layer("accounted", lambda llm: Accounted(llm, p.ledger, p.prices)),
        Layer("near window", lambda llm: NearWindow(llm, p.ledger, p.window), used=not p.window.asked),
        Layer("answered", lambda llm: Answered(llm, cache=p.cache, endpoint=p.answerer, folder=p.folder,
                                               own_replies_only=p.users_model)),
        Layer("output checked", lambda llm: OutputChecked(llm, p.retry_budget), used=not p.remote),
        Layer("retrying", lambda llm: Retrying.with_retrier(llm, p.retrier), used=not p.remote),
        Layer("overflows", lambda llm: Overflows(llm, p.window)),
        Layer("rate limited", lambda llm: RateLimited(llm, rpm=s.rpm, tpm=s.tpm)),
        # a pool limits each endpoint on its own (`Pooled`); all of them together here. Batch jobs are held
        # back by no limit: all of a job's calls are in flight together
        Layer("concurrency limited", lambda llm: ConcurrencyLimited(llm, p.concurrency), used=not p.batch),
        # below the limit: only the calls actually in flight hold a reservation (all of a batch job's)
        *([Layer("budget guard", lambda llm: BudgetGuard(llm, cap, p.prices, batch=p.batch, models_of=p.models_of))]
          if cap is not None else []),
    ]
    return [layer for layer in listed if layer.used]


def assemble(bottom: LLM, stack: Sequence[Layer]) -> tuple[LLM, dict[str, LLM]]:
    """The layers of `stack` (top to bottom) wrapped around `bottom`: the top, and each layer by its name."""
    built: dict[str, LLM] = {}
    top = bottom
    for layer in reversed(stack):
        top = built[layer.name] = layer.wrap(top)
    return top, built


def _named(wrap: Wrap) -> str:
    return str(getattr(wrap, "__name__", None) or type(wrap).__name__)
