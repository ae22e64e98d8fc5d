"""One set of assumptions turned into a run's calls, tokens and cost, stage by stage, as the run places them.

The prediction renders the real prompts around the real documents (split as the run would split
them) and counts their tokens once; each stage's arithmetic then reads those counts and the
assumptions. Under the `cache` layout, a call's prompt prefix that an earlier call of the run
already sent (the system message and the document, or the shared notes and schema that lead a
short document's prompt) is counted as cached.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...config import DEFAULT_CONTEXT_WINDOW, Settings
from ...corpus.documents import Document, split_documents_async
from ...llm.pricing import PriceTable
from ...llm.types import Usage
from ...notes.final import HEAD_SHARE
from ...prompts.render import render
from ...stages.messages import SHARED_OVERHEAD
from ...stages.plan import CacheSeen, Shared, expected_shared, plan_populate, plan_round
from ...tokens import TokenCounter, estimate_tokens
from ..budgets import StageOptions, part_budget, stage_options
from ._figures import Assumptions, Estimate, StageEstimate, Tally

PER_MESSAGE = 4  # chat-template tokens around each message
SCHEMA_PROMPT = 250  # the schema request's instructions around the task and the notes
ANSWER_PROMPT = 450  # the answer's instructions around the task, notes, schema and records


@dataclass(frozen=True)
class Parts:
    """The corpus as a run would split it, and each part as its prompts show it."""

    parts: tuple[Document, ...]
    bodies: tuple[str, ...]

    @classmethod
    async def of(cls, documents: Sequence[Document], settings: Settings) -> Parts:
        window = settings.context_window or DEFAULT_CONTEXT_WINDOW
        parts = await split_documents_async(documents, part_budget(settings, window))
        return cls(parts, tuple(render("document", doc=p).text for p in parts))


@dataclass
class Predictor:
    """A run to predict: the task, the corpus as split, the settings, a token counter and the prices; `estimate`
    turns one set of assumptions into an `Estimate` (the prompts are counted on the first call only)."""

    task: str
    documents: int
    split: Parts
    settings: Settings
    counter: TokenCounter
    prices: PriceTable
    model: str | None = None
    _counts: list[int] = field(default_factory=list)
    _local: int = 0  # the corpus's tokens by r3con's own estimate

    async def estimate(self, a: Assumptions) -> Estimate:
        """The run's calls and tokens stage by stage, as `stages.plan` places them, and their prices."""
        c = await self._counted(a)
        stages = [_relevance(c)] if self.settings.rounds else []
        wrapped, relevant = c.notes(final=True)
        all_notes = c.notes_size(sum(relevant), wrapped)[0] if self.settings.rounds else 20
        if self.settings.structuring:
            stages += _structuring(c, all_notes, relevant)
        stages.append(_reason(c, all_notes))
        model = self.model or self.settings.model or "unknown"
        out = tuple(self._priced(s, model) for s in stages)
        return Estimate(model=model, documents=self.documents, parts=len(c.parts), stages=out,
                        assumptions=tuple(self._lines(c, model, out)))

    async def _counted(self, a: Assumptions) -> _Counted:
        settings = self.settings
        window = settings.context_window or DEFAULT_CONTEXT_WINDOW
        if not self._counts:
            system = render("reader_system").text
            rel = render("relevance", task=self.task, others="", max_words=max(50, settings.note_max_tokens // 2)).text
            pop = render("populate", task=self.task, schema="", notes="").text
            await asyncio.sleep(0)  # a point where Ctrl-C (which cancels the task) ends a large estimate
            self._counts = await self.counter.count([system, rel, pop, self.task, *self.split.bodies])
        scaled = [round((n + PER_MESSAGE) * a.token_scale) for n in self._counts]
        parts = self.split.parts
        system_t, relevance_t, populate_t, task_t = scaled[:4]
        if not self._local:  # the notes are selected by r3con's estimate: the corpus's text says how it counts
            self._local = sum(estimate_tokens(body) for body in self.split.bodies)
        budget_scale = sum(scaled[4:]) / self._local if self._local else a.token_scale
        return _Counted(settings, a, parts, window, stage_options(settings, window), system_t, relevance_t, populate_t, task_t,
                        {p.key: t for p, t in zip(parts, scaled[4:], strict=True)},
                        {p.key: i for i, p in enumerate(parts)}, budget_scale)

    def _priced(self, s: Tally, model: str) -> StageEstimate:
        stage_model = self.settings.model_for(s.name) or model
        cost = None
        if self.prices.find(stage_model) is not None:
            usage = Usage(calls=s.calls, prompt_tokens=s.input, completion_tokens=s.output, cached_tokens=s.cached)
            cost = self.prices.cost(stage_model, usage, batch=self.settings.batch and s.name in ("relevance", "populate"))
        return StageEstimate(s.name, s.calls, s.input, s.cached, s.output, cost)

    def _lines(self, c: _Counted, model: str, out: Sequence[StageEstimate]) -> list[str]:
        settings = self.settings
        budget = c.budget
        notes_line = ("all notes in full (no notes budget)" if budget is None
                      else f"other documents' notes take at most {budget:,} tokens a call (selective notes)")
        cache_line = ("cache layout: a call's system message and document are served from the prefix cache once an "
                      "earlier call sent them, or, for a document shorter than them, the notes (and schema) that "
                      "lead its prompt (vLLM, SGLang; OpenAI caches prefixes of 1,024 tokens or more)"
                      if c.cache else "paper layout: the instructions (and the notes up to a document's own) repeat "
                      "from call to call and are served from the prefix cache")
        price = (f"prices: {model}: {self.prices.quote(model).source}, cached and cache-written tokens as billed"
                 + (" at the batch discount for relevance and populate" if settings.batch else "")
                 + ("" if all(s.cost_usd is not None for s in out) else "; price unknown for some models: pass --prices FILE"))
        return [f"token counts: {self.counter.source}",
                f"{len(c.parts)} document parts of at most {part_budget(settings, c.window):,} tokens, context window "
                f"{c.window:,} tokens", f"{settings.rounds} relevance rounds; {notes_line}",
                *c.a.lines(), cache_line, price]


@dataclass(frozen=True)
class _Counted:
    """The prompt pieces of a run, counted and scaled to the endpoint's tokens, with the assumptions: what every
    stage's arithmetic reads."""

    settings: Settings
    a: Assumptions
    parts: tuple[Document, ...]
    window: int
    options: StageOptions
    system: int
    relevance: int
    populate: int
    task: int
    doc: dict[str, int]
    position: dict[str, int]
    budget_scale: float = 1.0  # the endpoint's tokens per token of r3con's estimate (`tokens.estimate_tokens`)

    @property
    def cache(self) -> bool:
        return self.settings.layout == "cache"

    @property
    def budget(self) -> int | None:
        return self.options.relevance.notes_budget

    def notes(self, final: bool) -> tuple[int, list[bool]]:
        """A note's tokens as a prompt shows it, and which parts have one (in the first or the last round)."""
        a = self.a
        if not final:
            return a.note_tokens + a.note_tags_tokens, _relevant(len(self.parts), a.relevant_share, a.note_order)
        size = a.note_tokens if a.final_note_tokens is None else a.final_note_tokens
        return size + a.note_tags_tokens, _relevant(len(self.parts), a.final_share, a.note_order)

    def notes_size(self, count: int, wrapped: int) -> tuple[int, bool]:
        """The notes part of a call showing `count` notes, and whether the notes budget made it a selection."""
        full = count * wrapped + 10
        if self.budget is None:
            return full, False
        budget = round(self.budget * self.budget_scale)  # the budget is kept in r3con's own estimate of tokens
        return (full, False) if full <= budget else (budget, True)


def _relevance(c: _Counted) -> Tally:
    """The relevance rounds' calls as `plan_round` places them, and the re-asks the assumptions expect."""
    a, n = c.a, len(c.parts)
    tally = Tally("relevance")
    placement = c.options.relevance.placement
    expected = expected_shared(n, c.options.relevance.notes_budget, c.task)  # as the run places its calls
    for r in range(1, c.settings.rounds + 1):
        wrapped, relevant = c.notes(final=r > 2)
        sizes = [(0, False)] * n
        if r == 1:
            plan = plan_round(placement, r, c.parts, expected=expected)
        else:
            total = sum(relevant)
            sizes = [c.notes_size(total - own, wrapped) for own in relevant]  # each call's notes: all but its own
            plan = plan_round(placement, r, c.parts, [
                Shared(size + c.task + SHARED_OVERHEAD, common=not selected or not own)
                for (size, selected), own in zip(sizes, relevant, strict=True)], expected)
        note, answered = c.notes(final=r == c.settings.rounds and r > 1)  # the notes this round writes
        note -= a.note_tags_tokens
        seen = 0  # calls of this round that put the notes first
        for i, call in enumerate(plan.calls):
            d = c.doc[call.doc.key]
            others, selected = sizes[c.position[call.doc.key]]
            prompt = c.system + d + c.relevance + others
            if call.shared_first:  # the notes first: shared with the calls before, but for a few in prefix order
                unshared = others if selected else int(math.log2(max(2, n))) * wrapped
                cached = c.system + c.relevance + max(0, others - unshared) if seen else c.system
                seen += 1
            elif c.cache:  # the system message after the first call; the document after its first reading
                cached = c.system + d if r > 1 else (c.system if i > 0 else 0)
            else:  # instructions first: they repeat from call to call, and in later rounds the notes
                cached = c.system + c.relevance + others // 2 if i > 0 else 0  # up to this document's own note
            tally.call(prompt, cached, a.reply_tokens(answered[c.position[call.doc.key]], note))
    extra = round(tally.calls * (a.relevance_calls - 1))  # re-asks: a request's prompt again
    if extra > 0 and tally.calls:
        tally.call(tally.input // tally.calls, tally.cached // tally.calls, tally.output // tally.calls, times=extra)
    return tally


def _structuring(c: _Counted, all_notes: int, relevant: list[bool]) -> list[Tally]:
    """The schema call (every attempt when it fails: then no population) and population as `plan_populate`
    places its calls, with the re-asks the assumptions expect."""
    a, settings, n = c.a, c.settings, len(c.parts)
    schema = Tally("schema")
    schema.call(c.task + SCHEMA_PROMPT + all_notes, 0, a.schema_tokens,
                times=max(1, settings.schema_attempts) if a.schema_failed else 1)
    if a.schema_failed:  # as the run goes on: every attempt fails, no records
        return [schema]
    populate = Tally("populate")
    # notes that do not all fit: every call the first part (`HEAD_SHARE` of them), a document with a note its own after
    wrapped, _ = c.notes(final=True)
    selected = bool(settings.rounds) and c.notes_size(sum(relevant), wrapped)[1]
    head = int(HEAD_SHARE * all_notes) if selected else all_notes
    shared = c.populate + a.schema_tokens + head  # what every call shares
    calls = plan_populate(c.options.populate.placement, c.parts, Shared(shared, selected=selected), CacheSeen(),
                          reverse=settings.rounds % 2 == 1)
    seen = 0
    for i, call in enumerate(calls):
        d = c.doc[call.doc.key]
        prompt = c.system + d + shared + (all_notes - head if relevant[c.position[call.doc.key]] else 0)
        if call.shared_first:  # the same task, schema and notes first: prefilled once for all
            cached = c.system + shared if seen else c.system
            seen += 1
        elif c.cache:
            cached = c.system + d if settings.rounds else (c.system if i > 0 else 0)
        else:
            cached = c.system + shared if i > 0 else 0
        populate.call(prompt, cached, a.records_of(relevant[c.position[call.doc.key]], d))
    extra = round(n * (a.populate_calls - 1))  # re-asks: the conversation so far, and the records again
    if extra > 0:
        records = populate.output // max(1, n)
        populate.call(populate.input // max(1, n) + records, populate.input // max(1, n), records, times=extra)
    return [schema, populate]


def _reason(c: _Counted, all_notes: int) -> Tally:
    """The answer: one call from the notes (direct, or after a failed schema), or the coding agent's steps."""
    a = c.a
    reason = Tally("reason")
    _, relevant = c.notes(final=True)
    data = min(c.settings.data_view_chars // 4, sum(a.records_of(noted, c.doc[p.key])
                                                     for noted, p in zip(relevant, c.parts, strict=True)))
    structured = c.settings.structuring and not a.schema_failed  # else no schema and no records to show
    first = ANSWER_PROMPT + c.task + all_notes + (a.schema_tokens + data if structured else 0)
    if c.settings.reasoning == "direct" or a.schema_failed:
        reason.call(first, 0, a.step_tokens)
        return reason
    for step in range(a.agent_steps):  # each step's prompt is the last one plus a reply and an observation
        prompt = first + step * 2 * a.step_tokens
        reason.call(prompt, prompt - 2 * a.step_tokens if step else 0, a.step_tokens)
    return reason


def _relevant(n: int, share: float, order: Sequence[int] = ()) -> list[bool]:
    """Which of `n` documents get a note when `share` of them do: the first of `order` (the parts likeliest to get
    one, as a sample saw them), else spread evenly over the corpus. Where the notes fall matters where the parts
    differ in length: a part's records grow with it."""
    spread = [math.floor((i + 1) * share + 1e-9) > math.floor(i * share + 1e-9) for i in range(n)]
    if len(order) != n:
        return spread
    out = [False] * n
    for i in order[:sum(spread)]:
        out[i] = True
    return out
