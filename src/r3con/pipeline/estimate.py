"""`r3con estimate`: predict a run's calls, tokens and cost per stage without calling the model.

The prediction renders the real prompts around the real documents (split as the run would split
them) and counts their tokens (with the endpoint's /tokenize, a tokenizer file, or the estimate);
what only the model can know is assumed and stated: the size of a note, of the schema, of a
document's records, the agent's steps. Under the `cache` layout, a call's prompt prefix that an
earlier call of the run already sent (the system message and the document, or the shared notes and
schema that lead a short document's prompt) is counted as cached.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..config import DEFAULT_CONTEXT_WINDOW, Settings
from ..corpus.documents import Document, split_documents_async
from ..errors import ConfigError, OutputError
from ..llm.pricing import PriceTable
from ..llm.types import LLM, ChatRequest, Completion, Usage
from ..notes.final import HEAD_SHARE
from ..prompts.render import render
from ..stages.messages import SHARED_OVERHEAD
from ..stages.plan import CacheSeen, Shared, plan_populate, plan_round
from ..tokens import EstimateCounter, TokenCounter
from ._ranges import Interval, Spread, draw, interval
from .method import part_budget, stage_options

PER_MESSAGE = 4  # chat-template tokens around each message


@dataclass(frozen=True)
class Assumptions:
    """What the estimate cannot know before the model answers; each can be set from the CLI, or
    measured on a few real calls (`sample`)."""

    note_tokens: int = 150  # a relevance note of a relevant document, in the first round
    relevant_share: float = 1.0  # the share of documents the model finds relevant (the others get no note)
    final_note_tokens: int | None = None  # the same in the last round (None: as in the first)
    final_relevant_share: float | None = None
    note_tags_tokens: int = 20  # a note's tags, document number and title around it in a prompt
    note_reply_tokens: int | None = None  # a relevance call's reply, NONE included (None: note_tokens)
    schema_tokens: int = 600  # the schema as JSON, in the populate and agent prompts, and the schema reply
    records_tokens: int = 300  # one document's records (a populate reply)
    populate_calls: float = 1.0  # calls per document in population (re-asks included)
    token_scale: float = 1.0  # the endpoint's prompt tokens per token counted here
    agent_steps: int = 4  # steps of the coding agent until final_answer
    step_tokens: int = 400  # one agent reply, and one REPL observation
    sampled: int = 0  # documents the figures above were measured on (0: assumed)
    probes: int = 0  # first-round relevance calls the share and first notes were measured on
    sample_usage: Usage | None = None  # what measuring them took
    spread: Spread | None = None  # what the sample saw document by document (for the range)
    schema_failed: bool = False  # the sample's schema proposal failed: the run goes on without records, as it would
    relevance_calls: float = 1.0  # calls per relevance request, re-asks of empty or invalid replies included
    relevance_requests: int = 0  # the relevance requests `relevance_calls` was measured on (0: assumed)

    @property
    def final_share(self) -> float:
        return self.relevant_share if self.final_relevant_share is None else self.final_relevant_share

    def lines(self) -> list[str]:
        source = (f"measured on {self.sampled} sampled documents' relevance and population calls" if self.sampled
                  else "assumed")
        share_source = (f"{source}, the share and first notes on {self.probes} first-round calls along a BM25 "
                        "ranking" if self.probes > self.sampled else source)
        return [
            f"notes ({share_source}): {self.relevant_share:.0%} of documents get a note of {self.note_tokens} tokens "
            "in each relevance round" if self.final_note_tokens is None else
            f"notes ({share_source}): {self.relevant_share:.0%} of documents get a note of {self.note_tokens} tokens in "
            f"the first relevance round, {self.final_share:.0%} one of {self.final_note_tokens} tokens in the last",
            f"schema and records ({source}): the schema is {self.schema_tokens} tokens; each document's records "
            f"are {self.records_tokens} tokens; {self.populate_calls:.2f} population calls a document",
            f"the coding agent takes {self.agent_steps} steps of {self.step_tokens} tokens of reply and "
            f"{self.step_tokens} of REPL output each",
        ] + ([f"relevance calls ({source}): {self.relevance_calls:.2f} a request, re-asks of empty or invalid "
              "replies included"] if self.relevance_calls != 1.0 else []) + (["the sample's schema proposal failed, so the run is planned as a run goes on then: every schema "
              "attempt, no population, the answer directly from the notes in one call"] if self.schema_failed else []) + (
            [f"the endpoint counts {self.token_scale:.2f} tokens for each token counted here"]
             if self.token_scale != 1.0 else []) + (
            [f"sampling made {self.sample_usage.calls} calls ({self.sample_usage.prompt_tokens:,} prompt tokens, "
             f"${self.sample_usage.cost_usd:.4f})"] if self.sample_usage is not None else [])


@dataclass(frozen=True)
class StageEstimate:
    stage: str
    calls: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    cost_usd: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "calls": self.calls, "input_tokens": self.input_tokens,
                "cached_tokens": self.cached_tokens, "output_tokens": self.output_tokens,
                "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6)}


@dataclass(frozen=True)
class Estimate:
    """Predicted calls, tokens and USD per stage, with the assumptions they rest on."""

    model: str
    documents: int
    parts: int
    stages: tuple[StageEstimate, ...]
    assumptions: tuple[str, ...] = field(default=())
    range: EstimateRange | None = None  # how sure it is (a sampled estimate)

    @property
    def total(self) -> StageEstimate:
        costs = [s.cost_usd for s in self.stages]
        return StageEstimate(
            "total", sum(s.calls for s in self.stages), sum(s.input_tokens for s in self.stages),
            sum(s.cached_tokens for s in self.stages), sum(s.output_tokens for s in self.stages),
            None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "documents": self.documents, "parts": self.parts,
                "stages": [s.to_dict() for s in self.stages], "total": self.total.to_dict(),
                "range": None if self.range is None else self.range.to_dict(),
                "assumptions": list(self.assumptions)}


@dataclass(frozen=True)
class EstimateRange:
    """Low, expected and high calls, prompt tokens and USD of a sampled estimate, at `confidence`."""

    confidence: float
    calls: Interval
    prompt_tokens: Interval
    cost_usd: Interval | None
    draws: int  # sets of assumptions the range was read from
    narrower: str  # what would narrow it

    def lines(self) -> list[str]:
        share = f"{self.confidence:.0%}"
        cost = ("" if self.cost_usd is None else
                f"; USD {self.cost_usd.low:.4f} to {self.cost_usd.high:.4f} (expected {self.cost_usd.expected:.4f})")
        return [f"{share} range: calls {self.calls.low:,.0f} to {self.calls.high:,.0f} (expected "
                f"{self.calls.expected:,.0f}); prompt tokens {self.prompt_tokens.low:,.0f} to "
                f"{self.prompt_tokens.high:,.0f} (expected {self.prompt_tokens.expected:,.0f}){cost}",
                self.narrower]

    def to_dict(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "calls": self.calls.to_dict(),
                "prompt_tokens": self.prompt_tokens.to_dict(),
                "cost_usd": None if self.cost_usd is None else self.cost_usd.to_dict(6),
                "draws": self.draws, "narrower": self.narrower}


@dataclass
class _Stage:
    name: str
    calls: int = 0
    input: int = 0
    cached: int = 0
    output: int = 0

    def call(self, prompt: int, cached: int, output: int, times: int = 1) -> None:
        self.calls += times
        self.input += prompt * times
        self.cached += min(cached, prompt) * times
        self.output += output * times


async def estimate_run(
    task: str, documents: Sequence[Document], settings: Settings, *, counter: TokenCounter | None = None,
    assumptions: Assumptions | None = None, prices: PriceTable | None = None, model: str | None = None,
) -> Estimate:
    """Predict the run `r3con run` would make with `settings` over `documents` (no model call).

    Each call is placed by the planner the stages use (`stages.plan`), assuming that the endpoint's
    cache keeps what it is sent (so every probe finds its document)."""
    return await _estimate(task, len(documents), await _Parts.of(documents, settings), settings,
                           counter or EstimateCounter(), assumptions or Assumptions(),
                           prices or PriceTable.load(settings.prices_file, base_url=settings.base_url), model)


@dataclass(frozen=True)
class _Parts:
    """The corpus as a run would split it, and each part as its prompts show it."""

    parts: tuple[Document, ...]
    bodies: tuple[str, ...]

    @classmethod
    async def of(cls, documents: Sequence[Document], settings: Settings) -> _Parts:
        window = settings.context_window or DEFAULT_CONTEXT_WINDOW
        parts = await split_documents_async(documents, part_budget(settings, window))
        return cls(parts, tuple(render("document", doc=p).text for p in parts))


async def _estimate(task: str, documents: int, split: _Parts, settings: Settings, counter: TokenCounter,
                    a: Assumptions, prices: PriceTable, model: str | None) -> Estimate:
    """The run's calls and tokens stage by stage, as `stages.plan` places them, and their prices.

    Long on purpose (one of the two functions in src/ over 80 lines): it is the run's arithmetic twin, each
    stage's section beside the next in the order the run makes its calls, sharing the counted prompt
    pieces and the notes' sizes; split, the same dozen values would travel through every piece."""
    model = model or settings.model or "unknown"
    window = settings.context_window or DEFAULT_CONTEXT_WINDOW
    parts = split.parts
    options = stage_options(settings, window)
    budget = options.relevance.notes_budget
    n = len(parts)
    first_notes = (a.note_tokens + a.note_tags_tokens, _relevant(n, a.relevant_share))
    last_notes = ((a.note_tokens if a.final_note_tokens is None else a.final_note_tokens) + a.note_tags_tokens,
                  _relevant(n, a.final_share))
    wrapped_note, relevant = first_notes
    placement = options.relevance.placement
    position = {p.key: i for i, p in enumerate(parts)}

    def notes_size(count: int) -> tuple[int, bool]:  # the notes part of a call, and whether selection applied
        full = count * wrapped_note + 10  # of the notes of the round before
        return (full, False) if budget is None or full <= budget else (budget, True)

    system = render("reader_system").text
    rel_instr = render("relevance", task=task, others="", max_words=max(50, settings.note_max_tokens // 2)).text
    pop_instr = render("populate", task=task, schema="", notes="").text
    await asyncio.sleep(0)  # a point where Ctrl-C (which cancels the task) ends a large estimate
    counted = await counter.count([system, rel_instr, pop_instr, task, *split.bodies])
    scale = a.token_scale
    sys_t, rel_t, pop_t, task_t = (round((c + PER_MESSAGE) * scale) for c in counted[:4])
    doc_t = {p.key: round((c + PER_MESSAGE) * scale) for p, c in zip(parts, counted[4:], strict=True)}
    cache = settings.layout == "cache"
    reply = a.note_tokens if a.note_reply_tokens is None else a.note_reply_tokens

    relevance = _Stage("relevance")
    for r in range(1, settings.rounds + 1):
        wrapped_note, relevant = first_notes if r <= 2 else last_notes
        if r == 1:
            plan = plan_round(placement, r, parts)
        else:
            total = sum(relevant)
            sizes = [notes_size(total - own) for own in relevant]  # each call's notes: all but its own
            plan = plan_round(placement, r, parts, [
                Shared(size + task_t + SHARED_OVERHEAD, common=not selected or not own)
                for (size, selected), own in zip(sizes, relevant, strict=True)])
        seen = 0  # calls of this round that put the notes first
        for i, call in enumerate(plan.calls):
            d = doc_t[call.doc.key]
            others, selected = (0, False) if r == 1 else sizes[position[call.doc.key]]
            prompt = sys_t + d + rel_t + others
            if call.shared_first:  # the notes first: shared with the calls before, but for a few in prefix order
                unshared = others if selected else int(math.log2(max(2, n))) * wrapped_note
                cached = sys_t + rel_t + max(0, others - unshared) if seen else sys_t
                seen += 1
            elif cache:  # the system message after the first call; the document after its first reading
                cached = sys_t + d if r > 1 else (sys_t if i > 0 else 0)
            else:  # instructions first: they repeat from call to call, and in later rounds the notes
                cached = sys_t + rel_t + others // 2 if i > 0 else 0  # up to this document's own note
            relevance.call(prompt, cached, reply)
    extra = round(relevance.calls * (a.relevance_calls - 1))  # re-asks: a request's prompt again
    if extra > 0 and relevance.calls:
        relevance.call(relevance.input // relevance.calls, relevance.cached // relevance.calls,
                       relevance.output // relevance.calls, times=extra)
    stages = [relevance] if settings.rounds else []
    wrapped_note, relevant = last_notes
    all_notes = notes_size(sum(relevant))[0] if settings.rounds else 20

    if settings.structuring and a.schema_failed:  # as the run goes on: every attempt fails, no records
        schema = _Stage("schema")
        schema.call(task_t + 250 + all_notes, 0, a.schema_tokens, times=max(1, settings.schema_attempts))
        stages.append(schema)
    elif settings.structuring:
        schema = _Stage("schema")
        schema.call(task_t + 250 + all_notes, 0, a.schema_tokens)
        populate = _Stage("populate")
        # notes that do not all fit: every call the first part (`HEAD_SHARE` of them), a document with a note its own after
        selected = bool(settings.rounds) and notes_size(sum(relevant))[1]
        head = int(HEAD_SHARE * all_notes) if selected else all_notes
        shared_t = pop_t + a.schema_tokens + head  # what every call shares
        calls = plan_populate(placement, parts, Shared(shared_t, selected=selected), CacheSeen(),
                              reverse=settings.rounds % 2 == 1)
        seen = 0
        for i, call in enumerate(calls):
            d = doc_t[call.doc.key]
            prompt = sys_t + d + shared_t + (all_notes - head if relevant[position[call.doc.key]] else 0)
            if call.shared_first:  # the same task, schema and notes first: prefilled once for all
                cached = sys_t + shared_t if seen else sys_t
                seen += 1
            elif cache:
                cached = sys_t + d if settings.rounds else (sys_t if i > 0 else 0)
            else:
                cached = sys_t + shared_t if i > 0 else 0
            populate.call(prompt, cached, a.records_tokens)
        extra = round(n * (a.populate_calls - 1))  # re-asks: the conversation so far, and the records again
        if extra > 0:
            populate.call(populate.input // max(1, n) + a.records_tokens, populate.input // max(1, n),
                          a.records_tokens, times=extra)
        stages += [schema, populate]

    reason = _Stage("reason")
    data = min(settings.data_view_chars // 4, n * a.records_tokens)
    first = 450 + task_t + all_notes + a.schema_tokens + data
    if settings.reasoning == "direct" or a.schema_failed:  # a failed schema: the answer directly from the notes
        reason.call(first, 0, a.step_tokens)
    else:
        for step in range(a.agent_steps):  # each step's prompt is the last one plus a reply and an observation
            prompt = first + step * 2 * a.step_tokens
            reason.call(prompt, prompt - 2 * a.step_tokens if step else 0, a.step_tokens)
    stages.append(reason)

    batched = {"relevance", "populate"} if settings.batch else set()
    out = []
    for s in stages:
        stage_model = settings.model_for(s.name) or model
        price = prices.find(stage_model)
        cost = None
        if price is not None:
            usage = Usage(calls=s.calls, prompt_tokens=s.input, completion_tokens=s.output, cached_tokens=s.cached)
            cost = prices.cost(stage_model, usage, batch=s.name in batched)
        out.append(StageEstimate(s.name, s.calls, s.input, s.cached, s.output, cost))

    notes_line = ("all notes in full (no notes budget)" if budget is None
                  else f"other documents' notes take at most {budget:,} tokens a call (selective notes)")
    cache_line = ("cache layout: a call's system message and document are served from the prefix cache once an "
                  "earlier call sent them, or, for a document shorter than them, the notes (and schema) that "
                  "lead its prompt (vLLM, SGLang; OpenAI caches prefixes of 1,024 tokens or more)"
                  if cache else "paper layout: the instructions (and the notes up to a document's own) repeat "
                  "from call to call and are served from the prefix cache")
    lines = [
        f"token counts: {counter.source}",
        f"{n} document parts of at most {part_budget(settings, window):,} tokens, context window {window:,} tokens",
        f"{settings.rounds} relevance rounds; {notes_line}",
        *a.lines(),
        cache_line,
        f"prices: {model}: {prices.quote(model).source}" + (" at the batch discount for relevance and populate"
                                                              if settings.batch else "")
        + ("" if all(s.cost_usd is not None for s in out) else "; price unknown for some models: pass --prices FILE"),
    ]
    return Estimate(model=model, documents=documents, parts=n, stages=tuple(out), assumptions=tuple(lines))


@dataclass(frozen=True)
class PlannedEndpoint:
    """The endpoint a run would use, found as `run` finds it: its model, window and concurrency, and whence."""

    base_url: str
    model: str
    context_window: int
    context_window_source: str
    concurrency: int
    concurrency_source: str

    def line(self) -> str:
        return (f"planned for {self.base_url}, model {self.model}: window {self.context_window:,} tokens "
                f"({self.context_window_source}), {self.concurrency} calls in flight ({self.concurrency_source})")

    def to_dict(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "model": self.model, "context_window": self.context_window,
                "context_window_source": self.context_window_source, "concurrency": self.concurrency,
                "concurrency_source": self.concurrency_source}


async def plan_endpoint(settings: Settings) -> PlannedEndpoint:
    """Open the endpoint as `run` opens it (`build_llm`: a pool, a router's workers, the server's slots and
    window) and say what it found; no chat call is made."""
    from dataclasses import replace as replaced

    from ..llm import build_llm

    async with build_llm(replaced(settings, cache=False, max_cost_usd=None)) as stack:
        info = stack.endpoint
        chosen = stack.concurrency or (0, "unknown")
        return PlannedEndpoint(info.base_url, info.model, info.context_window, info.context_window_source,
                               int(chosen[0]), str(chosen[1]))


CONFIDENCE = 0.9  # the share of runs a range is meant to hold
DRAWS = 300  # sets of assumptions a range is read from


async def estimate_range(
    task: str, documents: Sequence[Document], settings: Settings, assumptions: Assumptions, *,
    counter: TokenCounter | None = None, prices: PriceTable | None = None, model: str | None = None,
    confidence: float = CONFIDENCE, draws: int = DRAWS, seed: int = 0,
) -> Estimate:
    """`estimate_run` with the range a sample allows: `draws` sets of assumptions the sample is
    consistent with (`_ranges.draw`), each predicted as `estimate_run` predicts the expected figures,
    and the central `confidence` of their calls, prompt tokens and cost. Assumptions that were not
    sampled get no range."""
    counter = _Remembered(counter or EstimateCounter())
    prices = prices or PriceTable.load(settings.prices_file, base_url=settings.base_url)
    split = await _Parts.of(documents, settings)
    expected = await _estimate(task, len(documents), split, settings, counter, assumptions, prices, model)
    spread = assumptions.spread
    if spread is None:
        return expected

    async def read(spread: Spread, draws: int) -> tuple[Interval, Interval, Interval | None]:
        rng = random.Random(seed)
        steps = settings.max_steps if settings.reasoning == "code" else 0
        a = assumptions
        growth = (a.final_note_tokens or a.note_tokens) - a.note_tokens
        runs = [(await _estimate(task, len(documents), split, settings, counter,
                                 replace(a, **draw(spread, a.note_tokens, growth, steps, rng),
                                         relevance_calls=_reasked(a, rng)), prices, model)).total
                for _ in range(draws)]
        total = expected.total
        costs = [r.cost_usd for r in runs]
        cost = (None if total.cost_usd is None or any(c is None for c in costs)
                else interval([c or 0.0 for c in costs], total.cost_usd, confidence))
        return (interval([r.calls for r in runs], total.calls, confidence),
                interval([r.input_tokens for r in runs], total.input_tokens, confidence), cost)

    calls, prompt, cost = await read(spread, draws)
    doubled = (await read(spread.doubled(), max(20, draws // 3)))[1]  # a hint: fewer draws
    narrower = (f"the range rests on {spread.probes} first-round calls ({spread.noted} with a note) and "
                f"{len(spread.note_tokens)} notes' sizes; --sample {2 * assumptions.sampled} would narrow the prompt "
                f"tokens to about ±{doubled.half_width():.0%} if it saw the same (now ±{prompt.half_width():.0%})")
    return replace(expected, range=EstimateRange(confidence, calls, prompt, cost, draws, narrower))


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
        self.source = inner.source
        self.known: dict[str, int] = {}

    async def count(self, texts: Sequence[str]) -> list[int]:
        new = [t for t in dict.fromkeys(texts) if t not in self.known]
        if new:
            self.known.update(zip(new, await self.inner.count(new), strict=True))
        return [self.known[t] for t in texts]


def _relevant(n: int, share: float) -> list[bool]:
    """Which of `n` documents get a note when `share` of them do: spread evenly over the corpus."""
    return [math.floor((i + 1) * share + 1e-9) > math.floor(i * share + 1e-9) for i in range(n)]


async def sample(task: str, documents: Sequence[Document], settings: Settings, count: int, *,
                 counter: TokenCounter | None = None, base: Assumptions | None = None) -> tuple[Assumptions, int]:
    """Assumptions measured on `count` documents' real relevance rounds and population calls: the share
    of documents with a note and the notes' size (first and last round), the schema's, the records',
    the re-asks, and how the endpoint counts tokens against `counter`; and the context window the run
    would use (the endpoint's, unless set). The documents are spread over a BM25 ranking of the corpus
    for the task, and up to `count` more first-round calls refine it where relevance changes or notes
    are written (`_gaps`), so that the share and note sizes do not come in steps of 1/count; later rounds
    read the notes the whole corpus would give. First-round calls are the run's own, so with the LLM
    cache the run does not pay for them again.
    Long on purpose (the other function in src/ over 80 lines): one real, small run of the stages in their
    order, each measurement taken from the replies of the stage before it."""
    from ..llm import build_llm
    from ..notes.retrieval import ranking
    from ..notes.selection import format_notes, note_refs, notes_bm25
    from ..stages.populate import populate, sent_schema
    from ..stages.relevance import extract_relevance, reread
    from ..stages.schema import propose_schema, schema_text

    counter = counter or EstimateCounter()
    base = base or Assumptions()
    async with build_llm(settings) as stack:
        window = settings.context_window or stack.endpoint.context_window
        parts = await split_documents_async(documents, part_budget(settings, window))
        k = max(1, min(count, len(parts)))
        ranked = ranking(notes_bm25([p.text for p in parts]).scores(task))
        places = [(2 * j + 1) * len(parts) // (2 * k) for j in range(k)]
        picks = [parts[i] for i in sorted(ranked[i] for i in places)]
        recorded = _ByRound(stack)
        stages = stage_options(settings, window)
        options = replace(stages.relevance, rounds=1)
        notes = dict((await extract_relevance(recorded, task, picks, options)).rounds[0])
        read = recorded.usage.get(1, Usage())
        probed = {i: notes[parts[ranked[i]].key] for i in places}
        for _ in range(k):  # refine along the ranking, with first-round calls only
            targets = _gaps(probed)[: k - (len(probed) - len(places))]
            if not targets:
                break
            extra = await extract_relevance(stack, task, [parts[ranked[i]] for i in targets], options)
            probed.update((i, extra.rounds[0][parts[ranked[i]].key]) for i in targets)
        first = [n for n in notes.values() if n]
        first_by_key = notes
        nearest = _nearest(sorted(probed), len(parts))
        corpus_notes = {parts[ranked[i]].key: probed[nearest[i]] for i in range(len(parts))}
        for round_no in range(2, settings.rounds + 1):  # later rounds see the notes the whole corpus would give
            notes = dict(await reread(recorded, task, parts, corpus_notes, picks, round_no, options))
            kept = sorted(i for i in places if notes.get(parts[ranked[i]].key))
            by_pick = _nearest(kept, len(parts)) if kept else {}
            corpus_notes = {parts[ranked[i]].key: notes[parts[ranked[by_pick[i]]].key]
                            if by_pick and corpus_notes[parts[ranked[i]].key] else "" for i in range(len(parts))}
        last = [n for n in notes.values() if n]
        found_final = notes
        system = render("reader_system").text
        instr = render("relevance", task=task, others="", max_words=max(50, settings.note_max_tokens // 2)).text
        counted = await counter.count([system, instr, *(render("document", doc=p).text for p in picks)])
        sent = sum(counted[0] + counted[1] + c + 3 * PER_MESSAGE for c in counted[2:])
        scale = read.prompt_tokens / sent if read.calls == k and sent else base.token_scale
        share, first_size = await _along_ranking(probed, len(parts), counter, scale)
        sizes = [await _mean_tokens(counter, notes, scale) for notes in (first, last)]
        growth = sizes[1] - sizes[0] if sizes[0] and sizes[1] else 0  # what the last round adds to a note
        retained = len(last) / len(first) if first else 1.0
        refs = note_refs(picks, found_final)
        wrapped = await counter.count([format_notes([r]) for r in refs])
        tags = round((sum(wrapped) - 3 * len(refs)) / len(refs) * scale) - sizes[1] if refs else base.note_tags_tokens
        schema_tokens, records, calls = base.schema_tokens, base.records_tokens, base.populate_calls
        filled = Usage()
        proposed = None
        if settings.structuring:
            text = format_notes(note_refs(picks, found_final))
            try:
                proposed = await propose_schema(stack, task, text, max_attempts=settings.schema_attempts,
                                                temperature=settings.temperature)
            except OutputError:  # the run goes on without a schema (the answer from the notes), and so does the
                proposed = None  # sample: the schema and records stay as assumed
        if proposed is not None:
            schema_tokens = round((await counter.count([schema_text(sent_schema(proposed.schema))]))[0] * scale)
            await populate(stack, task, proposed.schema, picks, text, stages.populate)
            filled = stack.ledger.by_stage().get("populate", Usage())
            if filled.calls:
                records, calls = round(filled.completion_tokens / filled.calls), filled.calls / k
        spent = stack.ledger.total()
        noted = [probed[r] for r in sorted(probed) if probed[r]]
        both = [key for key, note in first_by_key.items() if note and notes.get(key)]
        paired = await counter.count([first_by_key[key] for key in both] + [notes[key] for key in both])
        bounds = [j * len(parts) // k for j in range(k + 1)]  # stretch j of the ranking holds places[j]
        strata = tuple((high - low, sum(1 for r in probed if low <= r < high),
                        sum(1 for r, note in probed.items() if low <= r < high and note))
                       for low, high in zip(bounds, bounds[1:], strict=False))
        spread = Spread(
            strata=strata,
            note_tokens=tuple(round(c * scale) for c in await counter.count(noted)) if noted else (),
            growth=tuple(round((b - a) * scale) for a, b in zip(paired[:len(both)], paired[len(both):], strict=True)),
            first_noted=len(first), last_noted=len(both), note_cap=settings.note_max_tokens,
            populated=k if filled.calls else 0, populate_calls=filled.calls)
    return replace(
        base, sampled=k, token_scale=round(scale, 3), relevant_share=share,
        note_tokens=first_size or base.note_tokens, final_relevant_share=min(1.0, share * retained),
        final_note_tokens=max(1, first_size + growth) if first_size else base.note_tokens, probes=len(probed),
        note_reply_tokens=round(sum(u.completion_tokens for u in recorded.usage.values())
                                / max(1, sum(u.calls for u in recorded.usage.values()))),
        schema_tokens=schema_tokens, records_tokens=records, populate_calls=round(calls, 3),
        note_tags_tokens=max(0, tags), sample_usage=spent, spread=spread,
        schema_failed=settings.structuring and proposed is None,
        relevance_calls=round(recorded.attempts / max(1, sum(u.calls for u in recorded.usage.values())), 3),
        relevance_requests=sum(u.calls for u in recorded.usage.values()),
    ), window


def _gaps(probed: dict[int, str]) -> list[int]:
    """Ranks halfway between neighbouring probes of the ranking where one of them got a note: first where
    relevance changes, which finds where the relevant documents end (by bisection), then where both got
    one, which measures more notes; the widest gaps first. Between two probes without a note nothing is
    learnt."""
    ranks = sorted(probed)
    gaps = [(bool(probed[a]) == bool(probed[b]), a - b, (a + b) // 2) for a, b in zip(ranks, ranks[1:], strict=False)
            if b - a > 1 and (probed[a] or probed[b])]
    return [middle for *_, middle in sorted(gaps)]


def _nearest(ranks: Sequence[int], n: int) -> dict[int, int]:
    """For each of `n` ranks, the nearest of `ranks` (the higher-ranked on a tie)."""
    return {i: min(ranks, key=lambda r: (abs(r - i), r)) for i in range(n)}


async def _along_ranking(probed: dict[int, str], n: int, counter: TokenCounter, scale: float) -> tuple[float, int]:
    """The share of `n` ranked documents that get a note and the notes' mean tokens, each document taken
    to be like the probe nearest it in the ranking (so a probe stands for the documents around it)."""
    ranks = sorted(probed)
    counts = dict(zip(ranks, await counter.count([probed[r] or "" for r in ranks]), strict=True))
    weight = dict.fromkeys(ranks, 0)
    for r in _nearest(ranks, n).values():
        weight[r] += 1
    relevant = sum(w for r, w in weight.items() if probed[r])
    tokens = sum(w * counts[r] for r, w in weight.items() if probed[r])
    return relevant / n, round(tokens / relevant * scale) if relevant else 0


async def _mean_tokens(counter: TokenCounter, texts: Sequence[str], scale: float) -> int:
    """The mean tokens of `texts` as the endpoint counts them; 0 for none."""
    counts = await counter.count(list(texts)) if texts else []
    return round(sum(counts) / len(counts) * scale) if counts else 0


class _ByRound:
    """Passes calls on and adds up their usage per relevance round."""

    def __init__(self, inner: LLM):
        self.inner = inner
        self.usage: dict[int, Usage] = {}
        self.attempts = 0

    async def complete(self, request: ChatRequest) -> Completion:
        completion = await self.inner.complete(request)
        round_no = request.round or 0
        self.usage[round_no] = self.usage.get(round_no, Usage()) + replace(completion.usage, calls=1)
        self.attempts += completion.usage.calls or 1  # re-asks of an empty or invalid reply included
        return completion


def sample_documents(documents: Sequence[Document], spec: str) -> tuple[Document, ...]:
    """The documents a `--sample` run takes: N of them (or a share, "0.1"), those whose text has the lowest
    SHA-256, so the same files give the same sample whatever their names or order. They keep their numbers (a
    document is known by the same number in a sample and in the whole folder's run: reuse carries over)."""
    try:
        share = float(spec)
    except ValueError:
        share = -1.0
    if share <= 0 or (share >= 1 and not share.is_integer()):
        raise ConfigError(f"--sample {spec!r}: give a number of documents (5) or a share of them (0.1)")
    count = int(share) if share >= 1 else max(1, math.ceil(share * len(documents)))
    return tuple(sorted(sorted(documents, key=lambda d: d.sha256)[:count], key=lambda d: d.number))


@dataclass(frozen=True)
class Projection:
    """What a sample run cost beside the estimate for the whole folder, scaled by how the estimate did on the sample."""

    sampled: int
    documents: int
    sample_usage: Usage
    sample_estimate: StageEstimate
    whole_estimate: StageEstimate

    def lines(self) -> list[str]:
        ratio = self.sample_usage.calls / max(1, self.sample_estimate.calls)
        whole = self.whole_estimate
        cost = ("price unknown" if whole.cost_usd is None or self.sample_usage.known_cost is None else
                "free (local server)" if self.sample_usage.local_calls and not whole.cost_usd else
                f"${whole.cost_usd:.4f} estimated, ${self._scaled_cost():.4f} at the sample's cost against its estimate")
        return [f"sample: {self.sampled} of {self.documents} documents (those whose text has the lowest SHA-256: the "
                f"same files give the same sample): {self.sample_usage.calls:,} calls, "
                f"{self.sample_usage.prompt_tokens:,} prompt tokens, {self.sample_usage.cost_text()}",
                f"the whole folder ({self.documents} documents): about {whole.calls:,} calls "
                f"({round(whole.calls * ratio):,} at the sample's {ratio:.2f} calls per estimated call), "
                f"{whole.input_tokens:,} prompt tokens; {cost}"]

    def _scaled_cost(self) -> float:
        estimated = self.sample_estimate.cost_usd or 0.0
        whole = self.whole_estimate.cost_usd or 0.0
        return whole * (self.sample_usage.cost_usd / estimated) if estimated else whole

    def to_dict(self) -> dict[str, Any]:
        return {"sampled": self.sampled, "documents": self.documents, "sample_usage": self.sample_usage.to_dict(),
                "sample_estimate": self.sample_estimate.to_dict(), "whole_estimate": self.whole_estimate.to_dict()}


async def project(task: str, documents: Sequence[Document], sample: Sequence[Document], settings: Settings,
                  sample_usage: Usage, model: str) -> Projection:
    """The estimate for all `documents` beside what the run on `sample` of them cost (`settings` with the
    window the run used)."""
    whole = await estimate_run(task, documents, settings, model=model)
    part = await estimate_run(task, sample, settings, model=model)
    return Projection(len(sample), len(documents), sample_usage, part.total, whole.total)
