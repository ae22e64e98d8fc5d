"""Every estimate's range: from stated priors when nothing was sampled, from the sample's draws when it was.

Without a sample, each unknown (a note's length, the share of documents with a note, the re-asks,
a schema that fails, the records' and the agent's sizes) is taken at the low and the high end of its
prior (`Priors`), all together, once with a schema that works and once with one that fails: the
range holds every run whose unknowns fall within their priors, whatever way they combine. A sample
replaces the priors by what it saw, drawn as `_draws` describes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ...config import DEFAULT_CONTEXT_WINDOW, Settings
from ...corpus.documents import Document
from ...llm.pricing import PriceTable
from ...tokens import EstimateCounter, TokenCounter
from ..budgets import Budgets
from ._draws import Interval, Spread, draw, interval
from ._figures import Assumptions, Estimate, EstimateRange, StageEstimate
from ._predict import Parts, Predictor

CONFIDENCE = 0.9  # the share of runs a sampled range is meant to hold
DRAWS = 300  # sets of assumptions a sampled range is read from


@dataclass(frozen=True)
class Priors:
    """The low and high ends of what an unsampled estimate assumes, each stated with the estimate."""

    share: tuple[float, float] = (0.05, 1.0)  # documents with a note, in every round
    note: tuple[int, int | None] = (30, None)  # a note's tokens (None: the relevance calls' max_tokens)
    relevance_calls: tuple[float, float] = (1.0, 1.25)  # calls a relevance request takes, re-asks included
    schema: tuple[int, int] = (150, 2000)  # the schema's tokens
    records: tuple[int, float] = (20, 4.0)  # a document's records: tokens, and the high end as times the assumed
    populate_calls: tuple[float, float] = (1.0, 1.5)  # calls a document's population takes
    step: tuple[int, int] = (100, 1000)  # an agent reply's tokens, and its REPL output's
    local_scale: tuple[float, float] = (0.75, 1.35)  # endpoint tokens per token of the local estimate
    endpoint_scale: tuple[float, float] = (0.98, 1.05)  # ... per token of the endpoint's own count (its template)

    def corners(self, a: Assumptions, settings: Settings, window: int, counted_locally: bool) -> list[Assumptions]:
        """The low and the high ends of every prior together, each with a schema that works and one that fails."""
        cap = Budgets.of(settings, window).note_tokens
        scale = self.local_scale if counted_locally else self.endpoint_scale
        steps = (1, settings.max_steps + 1)
        out = []
        for end in (0, 1):
            note = min(cap, self.note[end] or cap)
            share = self.share[end]
            for failed in (False, True):
                out.append(replace(
                    a, relevant_share=share, final_relevant_share=share, note_tokens=note, final_note_tokens=note,
                    note_reply_tokens=round(share * note + (1 - share) * 2),  # the others reply NONE
                    relevance_calls=self.relevance_calls[end], schema_tokens=self.schema[end],
                    records_tokens=round(self.records[0] if not end else self.records[1] * a.records_tokens),
                    populate_calls=self.populate_calls[end], agent_steps=steps[end], step_tokens=self.step[end],
                    token_scale=a.token_scale * scale[end], schema_failed=failed))
        return out

    def lines(self, settings: Settings, window: int, counted_locally: bool) -> list[str]:
        cap = Budgets.of(settings, window).note_tokens
        scale = self.local_scale if counted_locally else self.endpoint_scale
        return [f"priors (the range, with no sample): {self.share[0]:.0%} to {self.share[1]:.0%} of documents get a "
                f"note of {self.note[0]} to {self.note[1] or cap:,} tokens in each round; "
                f"{self.relevance_calls[0]:.2f} to {self.relevance_calls[1]:.2f} calls a relevance request; the schema "
                f"{self.schema[0]:,} to {self.schema[1]:,} tokens, or it fails; a document's records {self.records[0]} "
                f"tokens to {self.records[1]:g} times the assumed, in {self.populate_calls[0]:.2f} to "
                f"{self.populate_calls[1]:.2f} calls; the agent 1 to {settings.max_steps + 1} steps of "
                f"{self.step[0]:,} to {self.step[1]:,} tokens; the endpoint counts {scale[0]:.2f} to {scale[1]:.2f} "
                "tokens for each counted here"]


PRIORS = Priors()


async def estimate_run(
    task: str, documents: Sequence[Document], settings: Settings, *, counter: TokenCounter | None = None,
    assumptions: Assumptions | None = None, prices: PriceTable | None = None, model: str | None = None,
    ranged: bool = True,
) -> Estimate:
    """Predict the run `r3con run` would make with `settings` over `documents` (no model call), with the range
    its assumptions' priors allow (`ranged=False`: the expected figures alone, a fifth of the work).

    Each call is placed by the planner the stages use (`stages.plan`), assuming that the endpoint's
    cache keeps what it is sent (so every probe finds its document)."""
    predictor = await _predictor(task, documents, settings, counter, prices, model)
    a = assumptions or Assumptions()
    expected = await predictor.estimate(a)
    if not ranged:
        return expected
    window = settings.context_window or DEFAULT_CONTEXT_WINDOW
    locally = predictor.counter.source.startswith("estimate")
    runs = [(await predictor.estimate(corner)).total for corner in PRIORS.corners(a, settings, window, locally)]
    span = _span(runs, expected.total, 1.0)
    return replace(expected, assumptions=(*expected.assumptions, *PRIORS.lines(settings, window, locally)),
                   range=EstimateRange(1.0, *span[:2], span[3], draws=len(runs), completion_tokens=span[2],
                                       basis="priors", narrower="--sample N measures the notes, the schema and the "
                                       "records on N documents and narrows the range"))


async def estimate_range(
    task: str, documents: Sequence[Document], settings: Settings, assumptions: Assumptions, *,
    counter: TokenCounter | None = None, prices: PriceTable | None = None, model: str | None = None,
    confidence: float = CONFIDENCE,
) -> Estimate:
    """`estimate_run` with the range a sample allows: `DRAWS` sets of assumptions the sample is
    consistent with (`_draws.draw`), each predicted as the expected figures are, and the central
    `confidence` of their calls, tokens and cost. With no sample (no `spread`), the priors' range."""
    if assumptions.spread is None:
        return await estimate_run(task, documents, settings, counter=counter, assumptions=assumptions,
                                  prices=prices, model=model)
    predictor = await _predictor(task, documents, settings, counter, prices, model)
    expected = await predictor.estimate(assumptions)
    spread = assumptions.spread

    async def read(spread: Spread, draws: int) -> tuple[Interval, Interval, Interval, Interval | None]:
        rng = random.Random(0)
        steps = settings.max_steps if settings.reasoning == "code" else 0
        a = assumptions
        growth = (a.final_note_tokens or a.note_tokens) - a.note_tokens
        runs = [(await predictor.estimate(replace(a, **{**draw(spread, a.note_tokens, growth, steps, rng),
                                                        **_steps(a, steps, rng)}, relevance_calls=_reasked(a, rng)))).total
                for _ in range(draws)]
        return _span(runs, expected.total, confidence)

    calls, prompt, completion, cost = await read(spread, DRAWS)
    doubled = (await read(spread.doubled(), DRAWS // 3))[1]  # a hint: fewer draws
    narrower = (f"the range rests on {spread.probes} first-round calls ({spread.noted} with a note) and "
                f"{len(spread.note_tokens)} notes' sizes; --sample {2 * assumptions.sampled} would narrow the prompt "
                f"tokens to about ±{doubled.half_width():.0%} if it saw the same (now ±{prompt.half_width():.0%})")
    return replace(expected, range=EstimateRange(confidence, calls, prompt, cost, DRAWS, narrower,
                                                 completion_tokens=completion))


def _span(runs: Sequence[StageEstimate], total: StageEstimate, confidence: float
          ) -> tuple[Interval, Interval, Interval, Interval | None]:
    """The calls, prompt and completion tokens and cost of `runs`, at `confidence`, around `total`."""
    costs = [r.cost_usd for r in runs]
    cost = (None if total.cost_usd is None or any(c is None for c in costs)
            else interval([c or 0.0 for c in costs], total.cost_usd, confidence))
    return (interval([r.calls for r in runs], total.calls, confidence),
            interval([r.input_tokens for r in runs], total.input_tokens, confidence),
            interval([r.output_tokens for r in runs], total.output_tokens, confidence), cost)


async def _predictor(task: str, documents: Sequence[Document], settings: Settings, counter: TokenCounter | None,
                     prices: PriceTable | None, model: str | None) -> Predictor:
    return Predictor(task, len(documents), await Parts.of(documents, settings), settings,
                     _Remembered(counter or EstimateCounter()),
                     prices or PriceTable.load(settings.prices_file, base_url=settings.base_url), model)


def _steps(a: Assumptions, max_steps: int, rng: random.Random) -> dict[str, int]:
    """The agent's steps when the sample ran it: one step either side of what it took (the run's records are
    more than the sample's); else `draw`'s, any number up to the last plain answer."""
    if not a.agent_sampled:
        return {}
    return {"agent_steps": min(max_steps + 1, max(1, a.agent_steps + rng.choice((-1, 0, 1))))}


def _reasked(a: Assumptions, rng: random.Random) -> float:
    """Relevance calls per request, drawn from what the sample saw: its k re-asks as a Poisson rate with
    the Jeffreys prior (Gamma(k + 1/2) over the requests sampled). A sample that saw none keeps 1.0: a
    server that answers every call is the run's usual case, and widening every range for it would not help."""
    reasks = round((a.relevance_calls - 1) * a.relevance_requests)
    if not a.relevance_requests or reasks <= 0:
        return a.relevance_calls
    return 1 + rng.gammavariate(reasks + 0.5, 1.0) / a.relevance_requests


class _Remembered:
    """A token counter that counts each text once (a range predicts the same prompts many times)."""

    def __init__(self, inner: TokenCounter):
        self.inner = inner
        self.known: dict[str, int] = {}
        self.source = inner.source

    async def count(self, texts: Sequence[str]) -> list[int]:
        new = [t for t in dict.fromkeys(texts) if t not in self.known]
        if new:
            self.known.update(zip(new, await self.inner.count(new), strict=True))
            self.source = self.inner.source  # it changes when the endpoint turns out to have no /tokenize
        return [self.known[t] for t in texts]
