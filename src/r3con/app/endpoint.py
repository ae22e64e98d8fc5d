"""The model server the app asks, found as `r3con run` finds it (or as configured), said as the page shows
it; and the plan for a question over the workspace (calls, tokens, cost, with the range)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..config import Settings
from ..corpus.documents import Document
from ..errors import R3conError
from ..llm.discovery.local import local_ports, use_local_server, window_hint
from ..llm.pricing import PriceTable


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """What the page says of the server: where, which model, its window and price, and how it was found."""

    base_url: str | None
    model: str | None
    window: int | None
    kind: str  # "llama.cpp", "Ollama", "configured", "scripted (demo)", or "none"
    price: str
    hint: str = ""
    problem: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def find_endpoint(settings: Settings, *, demo: bool = False) -> tuple[Settings, Endpoint]:
    """`settings` with the local server found on its usual port when none is configured, and what was found."""
    try:
        found, server, chosen = use_local_server(settings, local_ports(), required=False)
    except R3conError as exc:
        return settings, Endpoint(None, None, None, "none", "", problem=str(exc))
    if server is not None and chosen is not None:
        return found, Endpoint(server.base_url, chosen.id, chosen.window, server.kind,
                               price_text(found, chosen.id), window_hint(server, chosen))
    if not found.base_url:
        return found, Endpoint(None, None, None, "none", "", problem=(
            "no model server found: start llama.cpp, Ollama or vLLM on its usual port, or pass --base-url and "
            "--model (or set OPENAI_BASE_URL)"))
    kind = "scripted model (demo, offline)" if demo else "configured"
    return found, Endpoint(found.base_url, found.model, found.context_window, kind, price_text(found, found.model or ""))


def price_text(settings: Settings, model: str) -> str:
    """"$0.15 / $0.60 per million tokens in / out", "free (a server on this machine)" or why unknown."""
    quote = PriceTable.load(settings.prices_file, base_url=settings.base_url).quote(model)
    price = quote.price
    if price is None:
        return f"unknown ({quote.source})"
    if price.input == 0 and price.output == 0:
        return "free (a server on this machine)"
    return f"${price.input:g} / ${price.output:g} per million tokens in / out"


async def planned_endpoint(settings: Settings) -> Any:
    """The endpoint as a run opens it (its model, window and slots: `estimate.plan_endpoint`), or None when
    none is named."""
    from ..pipeline.estimate import plan_endpoint

    if not (settings.base_url or settings.pool_file is not None):
        return None
    return await plan_endpoint(settings)


async def plan(question: str, documents: Sequence[Document], settings: Settings, planned: Any) -> dict[str, Any]:
    """The plan a run of `question` would start with (`Plan.to_dict()`, what `r3con estimate --json` prints):
    calls, tokens and cost per stage, with the range, for the endpoint's window and slots."""
    from ..config import DEFAULT_CONTEXT_WINDOW
    from ..pipeline.estimate import estimate_run
    from ..pipeline.planned import plan_of

    measured = settings
    if planned is not None:
        measured = dataclasses.replace(settings, model=settings.model or planned.model,
                                       context_window=settings.context_window or planned.context_window,
                                       concurrency=settings.concurrency or planned.concurrency)
    estimate = await estimate_run(question, documents, measured)
    window = settings.context_window or (planned.context_window if planned else DEFAULT_CONTEXT_WINDOW)
    out = plan_of(estimate, settings, planned, window).to_dict()
    total = out["total"]
    out["line"] = (f"{total['calls']:,} {'call' if total['calls'] == 1 else 'calls'}, about "
                   f"{total['input_tokens'] + total['output_tokens']:,} tokens, "
                   + ("cost unknown" if total["cost_usd"] is None else "free" if total["cost_usd"] == 0
                      else f"about ${total['cost_usd']:.4f}"))
    return out
