"""`estimate --sample N`: the assumptions measured on a small, real run of the stages over N documents.

The documents are spread over a BM25 ranking of the corpus for the task, and up to N more
first-round calls refine it where relevance changes or notes are written (`_gaps`), so that the
share and note sizes do not come in steps of 1/N; later rounds read the notes the whole corpus
would give. First-round calls are the run's own, so with the LLM cache the run does not pay for
them again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import fmean, stdev
from typing import Any

from ...config import Settings
from ...corpus.documents import Document, split_documents_async
from ...errors import OutputError, R3conError
from ...llm.types import LLM, ChatRequest, Completion, Usage
from ...prompts.render import render
from ...tokens import EstimateCounter, TokenCounter
from ..budgets import StageOptions, part_budget, stage_options
from ._draws import Spread
from ._figures import Assumptions
from ._predict import PER_MESSAGE


@dataclass(frozen=True)
class _Read:
    """What the sample's relevance rounds saw."""

    parts: tuple[Document, ...]
    picks: list[Document]
    places: list[int]  # the picks' ranks along the BM25 ranking
    ranked: list[int]  # the parts' indices, best-ranked first
    probed: dict[int, str]  # first-round notes by rank, the refining calls' included
    first: dict[str, str]  # the picks' first-round notes
    last: dict[str, str]  # the picks' last-round notes
    corpus: dict[str, str]  # the last-round notes the whole corpus would give, each part's its nearest probe's

    def note_order(self) -> tuple[int, ...]:
        """The parts' positions, those the sample gives a last-round note (each its nearest probe's) first, each
        group along the ranking: where a prediction with more or fewer notes puts them."""
        noted = {i for i, p in enumerate(self.parts) if self.corpus.get(p.key)}
        return tuple(sorted(self.ranked, key=lambda i: i not in noted))

    def populated(self) -> list[Document]:
        """The parts the sample fills: the picks, and as many more probes that got a note (a part's records come
        mostly from what made it relevant, so those are what the records' size is measured on)."""
        picked = {p.key for p in self.picks}
        noted = [self.parts[self.ranked[r]] for r in sorted(self.probed) if self.probed[r]]
        more = [p for p in noted if p.key not in picked][:len(self.picks)]
        order = {p.key: i for i, p in enumerate(self.parts)}
        return sorted([*self.picks, *more], key=lambda p: order[p.key])


async def sample(task: str, documents: Sequence[Document], settings: Settings, count: int, *,
                 counter: TokenCounter | None = None, base: Assumptions | None = None) -> tuple[Assumptions, int]:
    """Assumptions measured on `count` documents' real relevance rounds and population calls: the share
    of documents with a note and the notes' size (first and last round), the schema's, the records',
    the re-asks, and how the endpoint counts tokens against `counter`; and the context window the run
    would use (the endpoint's, unless set)."""
    from ...llm import build_llm

    counter = counter or EstimateCounter()
    base = base or Assumptions()
    async with build_llm(settings) as stack:
        window = settings.context_window or stack.endpoint.context_window
        parts = await split_documents_async(documents, part_budget(settings, window))
        options = stage_options(settings, window)
        recorded = _ByRound(stack)
        read = await _read(recorded, task, tuple(parts), count, options, settings.rounds)
        k = len(read.picks)
        scale = await _scale(counter, task, read.picks, recorded.usage.get(1, Usage()), base.token_scale, settings)
        measured = await _notes_measured(counter, read, scale, base, settings.note_max_tokens)
        structured = (await _structured(stack, task, read, counter, scale, options, settings, base)
                      if settings.structuring else {})
        measured.update(await _replies(recorded, read, counter, scale, settings.rounds))
        spent = [*recorded.usage.values(), recorded.probes]  # the picks' rounds and the probes' calls
        requests = sum(u.calls for u in spent)
        populated, filled = structured.pop("populated", Usage()), structured.pop("populated_parts", 0)
        spread = replace(measured.pop("spread"), populated=filled if populated.calls else 0,
                         populate_calls=populated.calls)
        return replace(
            base, sampled=k, token_scale=round(scale, 3), probes=len(read.probed), **measured, **structured,
            note_reply_tokens=round(sum(u.completion_tokens for u in spent) / max(1, requests)),
            sample_usage=stack.ledger.total(), spread=spread,
            relevance_calls=round(recorded.attempts / max(1, requests), 3), relevance_requests=requests,
            note_order=read.note_order(),
        ), window


async def _read(recorded: _ByRound, task: str, parts: tuple[Document, ...], count: int,
                stages: StageOptions, rounds: int) -> _Read:
    """The sample's relevance rounds: the picks' first round, refining first-round calls along the ranking,
    then the later rounds over the notes the whole corpus would give."""
    from ...notes.retrieval import ranking
    from ...notes.selection import notes_bm25
    from ...stages.relevance import extract_relevance, reread

    k = max(1, min(count, len(parts)))
    ranked = ranking(notes_bm25([p.text for p in parts]).scores(task))
    places = [(2 * j + 1) * len(parts) // (2 * k) for j in range(k)]
    picks = [parts[i] for i in sorted(ranked[i] for i in places)]
    options = replace(stages.relevance, rounds=1)
    notes = dict((await extract_relevance(recorded, task, picks, options)).rounds[0])
    probed = {i: notes[parts[ranked[i]].key] for i in places}
    budget = k + len(_top(probed))  # refine along the ranking, with first-round calls only (k, and the top's)
    for _ in range(k):
        targets = [*_top(probed), *_gaps(probed)][: budget - (len(probed) - len(places))]
        if not targets:
            break
        extra = await extract_relevance(recorded.probing(), task, [parts[ranked[i]] for i in targets], options)
        probed.update((i, extra.rounds[0][parts[ranked[i]].key]) for i in targets)
    targets = _gaps(probed)[:_wanted(probed, k)]
    if targets:  # the notes' sizes vary too much for their mean to be known: up to k more notes, in one go
        extra = await extract_relevance(recorded.probing(), task, [parts[ranked[i]] for i in targets], options)
        probed.update((i, extra.rounds[0][parts[ranked[i]].key]) for i in targets)
    first = notes
    nearest = _nearest(sorted(probed), len(parts))
    corpus_notes = {parts[ranked[i]].key: probed[nearest[i]] for i in range(len(parts))}
    for round_no in range(2, rounds + 1):  # later rounds see the notes the whole corpus would give
        notes = dict(await reread(recorded, task, parts, corpus_notes, picks, round_no, options))
        kept = sorted(i for i in places if notes.get(parts[ranked[i]].key))
        by_pick = _nearest(kept, len(parts)) if kept else {}
        corpus_notes = {parts[ranked[i]].key: notes[parts[ranked[by_pick[i]]].key]
                        if by_pick and corpus_notes[parts[ranked[i]].key] else "" for i in range(len(parts))}
    for pick in picks:  # the picks' own notes where they were read
        corpus_notes[pick.key] = notes.get(pick.key, "")
    return _Read(parts, picks, places, ranked, probed, first, notes, corpus_notes)


async def _scale(counter: TokenCounter, task: str, picks: Sequence[Document], read: Usage, assumed: float,
                 settings: Settings) -> float:
    """The endpoint's prompt tokens per token `counter` counts, from the first round's calls on the picks."""
    system = render("reader_system").text
    instr = render("relevance", task=task, others="", max_words=max(50, settings.note_max_tokens // 2)).text
    counted = await counter.count([system, instr, *(render("document", doc=p).text for p in picks)])
    sent = sum(counted[0] + counted[1] + c + 3 * PER_MESSAGE for c in counted[2:])
    return read.prompt_tokens / sent if read.calls == len(picks) and sent else assumed


NONE_REPLY = 3  # tokens of a relevance reply with no note, until a sampled call shows one


async def _replies(recorded: _ByRound, read: _Read, counter: TokenCounter, scale: float, rounds: int
                   ) -> dict[str, Any]:
    """What a relevance reply takes beyond its note, and a reply that gives none (the `Assumptions` fields)."""
    first = {read.parts[read.ranked[r]].key: note for r, note in read.probed.items()}  # the probes' too

    def noted(round_no: int, key: str) -> bool:
        return bool((first if round_no <= 1 else read.last).get(key))

    with_note, without = _split_replies(recorded, read, rounds, noted)
    notes = [n for n in (*first.values(), *(read.last.values() if rounds > 1 else ())) if n]
    mean_note = await _mean_tokens(counter, notes, scale)
    extra = round(with_note - mean_note) if with_note is not None and notes else 0
    return {"none_reply_tokens": NONE_REPLY if without is None else round(without), "note_reply_extra": extra}


async def _notes_measured(counter: TokenCounter, read: _Read, scale: float, base: Assumptions,
                          note_cap: int) -> dict[str, Any]:
    """The `Assumptions` fields the notes set: share, sizes, growth, tags; and the spread a range is drawn from."""
    from ...notes.selection import format_notes, note_refs

    n, k = len(read.parts), len(read.picks)
    first = [x for x in read.first.values() if x]
    last = [x for x in read.last.values() if x]
    share, first_size = await _along_ranking(read.probed, n, counter, scale)
    sizes = [await _mean_tokens(counter, notes, scale) for notes in (first, last)]
    growth = sizes[1] - sizes[0] if sizes[0] and sizes[1] else 0  # what the last round adds to a note
    retained = len(last) / len(first) if first else 1.0
    refs = note_refs(read.picks, read.last)
    wrapped = await counter.count([format_notes([r]) for r in refs])
    tags = round((sum(wrapped) - 3 * len(refs)) / len(refs) * scale) - sizes[1] if refs else base.note_tags_tokens
    noted = [read.probed[r] for r in sorted(read.probed) if read.probed[r]]
    both = [key for key, note in read.first.items() if note and read.last.get(key)]
    paired = await counter.count([read.first[key] for key in both] + [read.last[key] for key in both])
    bounds = [j * n // k for j in range(k + 1)]  # stretch j of the ranking holds places[j]
    strata = tuple((high - low, sum(1 for r in read.probed if low <= r < high),
                    sum(1 for r, note in read.probed.items() if low <= r < high and note))
                   for low, high in zip(bounds, bounds[1:], strict=False))
    spread = Spread(
        strata=strata, note_tokens=tuple(round(c * scale) for c in await counter.count(noted)) if noted else (),
        growth=tuple(round((b - a) * scale) for a, b in zip(paired[:len(both)], paired[len(both):], strict=True)),
        first_noted=len(first), last_noted=len(both), note_cap=note_cap, populated=0, populate_calls=0)
    return {"relevant_share": share, "note_tokens": first_size or base.note_tokens,
            "final_relevant_share": min(1.0, share * retained),
            "final_note_tokens": max(1, first_size + growth) if first_size else base.note_tokens,
            "note_tags_tokens": max(0, tags), "spread": spread}


async def _structured(stack: Any, task: str, read: _Read, counter: TokenCounter, scale: float, stages: StageOptions,
                      settings: Settings, base: Assumptions) -> dict[str, Any]:
    """The `Assumptions` fields the schema and the picks' population set, and the population's usage
    (`populated`). A schema that fails leaves the run without records, as it would."""
    from ...notes.final import FinalNotes
    from ...stages.populate import populate, sent_schema
    from ...stages.schema import propose_schema, schema_text

    # the notes as the run shows them: the whole corpus's (as the sample would have them), selected as the run selects
    final = await FinalNotes.of(task, read.parts, read.corpus, stages.relevance.notes_budget)
    try:
        proposed = await final.fit(lambda notes: propose_schema(
            stack, task, notes, max_attempts=settings.schema_attempts, temperature=settings.temperature))
    except OutputError:  # the run goes on without a schema (the answer from the notes), and so does the sample
        return {"schema_failed": True, **await _failed_schema(stack, task, final.choice.text, stages)}
    schema_tokens = round((await counter.count([schema_text(sent_schema(proposed.schema))]))[0] * scale)
    recorded = _ByRound(stack)
    docs = read.populated()
    records = await populate(recorded, task, proposed.schema, docs, final, stages.populate)
    text = final.choice.text
    filled = stack.ledger.by_stage().get("populate", Usage())
    out: dict[str, Any] = {"schema_tokens": schema_tokens, "populated": filled, "populated_parts": len(docs),
                           "schema_failed": False}
    if filled.calls:
        noted, other = _split_replies(recorded, read, 0, lambda _, key: bool(read.corpus.get(key)))
        mean = filled.completion_tokens / filled.calls
        out.update(records_tokens=round(mean if noted is None else noted),
                   unnoted_records_tokens=None if other is None or noted is None else round(other),
                   records_density=await _density(recorded, read, docs, counter, scale),
                   populate_calls=round(filled.calls / len(docs), 3))
    else:
        out.update(records_tokens=base.records_tokens)
    if settings.reasoning == "code":
        out.update(await _agent(stack, task, read, text, schema_text(proposed.schema), records.tables, stages, base))
    return out


async def _failed_schema(stack: Any, task: str, notes: str, stages: StageOptions) -> dict[str, Any]:
    """After a schema that failed: its attempts' reply tokens, and the direct answer's the run then makes."""
    from ...stages.answer import answer_direct

    tried = stack.ledger.by_stage().get("schema", Usage())
    out: dict[str, Any] = {"schema_tokens": round(tried.completion_tokens / tried.calls)} if tried.calls else {}
    try:
        await answer_direct(stack, task, notes, "(no schema: structuring was skipped)", {}, stages.answer)
    except R3conError:
        return out
    answered = stack.ledger.by_stage().get("reason", Usage())
    if answered.calls:
        out["step_tokens"] = max(1, round(answered.completion_tokens / answered.calls))
    return out


async def _agent(stack: Any, task: str, read: _Read, notes: str, schema: str, tables: Any, stages: StageOptions,
                 base: Assumptions) -> dict[str, Any]:
    """The coding agent's steps and its replies' tokens, on the sample's records (the `Assumptions` fields). An
    agent that breaks leaves them as assumed: the run would answer directly then, in one call."""
    from ...stages.answer import answer_with_code

    try:
        await answer_with_code(stack, task, dict(read.corpus), notes, schema, tables, stages.answer)
    except R3conError:
        return {}
    spent = stack.ledger.by_stage().get("reason", Usage())
    if not spent.calls:
        return {}
    return {"agent_steps": spent.calls, "step_tokens": max(1, round(spent.completion_tokens / spent.calls)),
            "agent_sampled": True}


def _gaps(probed: dict[int, str]) -> list[int]:
    """Ranks halfway between neighbouring probes of the ranking where one of them got a note: first where
    relevance changes, which finds where the relevant documents end (by bisection), then where both got
    one, which measures more notes; the widest gaps first. Between two probes without a note nothing is
    learnt. Before them, one call on the best-ranked part when the best-ranked probe got a note (`_top`): the
    parts that say most about the task are few and their notes and records the largest, and each part is
    taken to be like its nearest probe, so without it the top of the ranking would be imputed from a part in
    the middle of its stretch (the take-all stratum of a skewed population)."""
    ranks = sorted(probed)
    gaps = [(bool(probed[a]) == bool(probed[b]), a - b, (a + b) // 2) for a, b in zip(ranks, ranks[1:], strict=False)
            if b - a > 1 and (probed[a] or probed[b])]
    return [middle for *_, middle in sorted(gaps)]


MEAN_ERROR = 0.1  # the notes' mean size is measured until its standard error is this share of it


def _wanted(probed: dict[int, str], most: int) -> int:
    """How many more notes would bring the standard error of the notes' mean size to `MEAN_ERROR` of it (their
    sizes in characters, which track their tokens), at most `most`. A model whose notes all run to about one
    length needs none; one whose notes run from a word to pages needs many, and the mean of a few would be as
    likely a third off as not."""
    sizes = [len(note) for note in probed.values() if note]
    if len(sizes) < 2 or not fmean(sizes):
        return 0
    cv = stdev(sizes) / fmean(sizes)
    return max(0, min(most, math.ceil((cv / MEAN_ERROR) ** 2) - len(sizes)))


def _top(probed: dict[int, str]) -> list[int]:
    """The best-ranked part, when it was not probed and the best-ranked probe got a note (`_gaps`)."""
    best = min(probed)
    return [0] if best > 0 and probed[best] else []


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
    """Passes calls on and adds up their usage per relevance round (the probes' apart: `probing`); keeps each
    call's reply tokens by its round and document part, and its attempts."""

    def __init__(self, inner: LLM):
        self.inner = inner
        self.usage: dict[int, Usage] = {}
        self.probes = Usage()  # the refining first-round calls' (not the picks' round, which `_scale` reads)
        self.attempts = 0
        self.replies: list[tuple[int, tuple[int | None, int], int]] = []  # round, (document, part), reply tokens

    async def complete(self, request: ChatRequest, probe: bool = False) -> Completion:
        completion = await self.inner.complete(request)
        round_no = request.round or 0
        used = replace(completion.usage, calls=1)
        if probe:
            self.probes += used
        else:
            self.usage[round_no] = self.usage.get(round_no, Usage()) + used
        self.attempts += completion.usage.calls or 1  # re-asks of an empty or invalid reply included
        self.replies.append((round_no, (request.doc, request.part or 1), completion.usage.completion_tokens))
        return completion

    def probing(self) -> _Probing:
        return _Probing(self)


class _Probing:
    """The probes' calls, recorded with the picks' (every reply the sample made counts) but for their usage."""

    def __init__(self, recorded: _ByRound):
        self.recorded = recorded

    async def complete(self, request: ChatRequest) -> Completion:
        return await self.recorded.complete(request, probe=True)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _split_replies(recorded: _ByRound, read: _Read, rounds: int, noted: Callable[[int, str], bool]
                   ) -> tuple[float | None, float | None]:
    """The mean reply tokens of the recorded calls whose document part gets a note in their round, and of the
    others (None: none seen)."""
    split: tuple[list[float], list[float]] = ([], [])
    for round_no, key, tokens in _replies_by_key(recorded, read):
        if round_no in (0, 1, rounds):
            split[0 if noted(round_no, key) else 1].append(tokens)
    return _mean(split[0]), _mean(split[1])


def _replies_by_key(recorded: _ByRound, read: _Read) -> list[tuple[int, str, int]]:
    """The recorded calls' rounds, parts' keys and reply tokens."""
    keys = {(p.number, p.part): p.key for p in read.parts}
    return [(round_no, keys[(where[0] or 0, where[1])], tokens) for round_no, where, tokens in recorded.replies
            if (where[0] or 0, where[1]) in keys]


async def _density(recorded: _ByRound, read: _Read, docs: Sequence[Document], counter: TokenCounter,
                   scale: float) -> tuple[float, float] | None:
    """Population reply tokens per token of a part, for the parts with a final note and those without (a longer
    part holds more records); None when a group was not seen. Each part of the corpus is taken to be like the
    populated part of its group nearest it along the ranking (as the notes are, `_along_ranking`), and the ratio
    is of their sums: the probes crowd where relevance changes, and a plain ratio over them would let those
    marginal parts stand for all; a part's own ratio carried to its neighbours would let one short part dense
    with records stand for long ones."""
    sizes = dict(zip((p.key for p in docs), await counter.count([render("document", doc=p).text for p in docs]),
                     strict=True))
    replies: dict[str, int] = {}
    for _, key, tokens in _replies_by_key(recorded, read):
        replies[key] = replies.get(key, 0) + tokens
    rank = {read.parts[i].key: r for r, i in enumerate(read.ranked)}
    out = []
    for noted in (True, False):
        seen = {rank[key]: key for key in replies if bool(read.corpus.get(key)) == noted and sizes.get(key)}
        if not seen:
            return None
        nearest = _nearest(sorted(seen), len(read.parts))
        like = [seen[nearest[rank[p.key]]] for p in read.parts if bool(read.corpus.get(p.key)) == noted]
        out.append(sum(replies[key] for key in like) / (sum(sizes[key] for key in like) * scale))
    return out[0], out[1]
