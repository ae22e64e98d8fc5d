"""Stage 1, relevance extraction: N rounds of task-focused notes, one call per document per round.

From round 2 on, each document is re-read with the previous round's notes of all OTHER documents
(never its own), labelled with their document numbers and titles. Rounds are barriers. When those
notes exceed the notes budget, the most relevant go in full and the rest as an index (notes_select);
a request refused as too long for the window is retried with half the notes, never cut silently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from .._fanout import DOCUMENT_ERRORS, cause_of
from .._prompts import render
from ..corpus import Document
from ..errors import ContextTooLong
from ..llm.replies import reply_text
from ..llm.types import LLM, ChatRequest
from ..results import Failure
from ..tokens import estimate_tokens
from ._common import (
    SHARED_OVERHEAD,
    SYSTEM_TOKENS,
    DocumentReuse,
    call_order,
    document_first,
    document_messages,
    note_refs,
    shared_goes_first,
)
from .notes_select import Embed, NotesChoice, NotesSelector, SelectionStats, shrink

STAGE = "relevance"


@dataclass(frozen=True)
class RelevanceResult:
    """Notes per round (document key -> note; '' means irrelevant) and the documents that failed."""

    rounds: tuple[Mapping[str, str], ...]
    failures: tuple[Failure, ...] = ()

    @property
    def final(self) -> Mapping[str, str]:
        return self.rounds[-1] if self.rounds else MappingProxyType({})


@dataclass(frozen=True)
class RelevanceOptions:
    rounds: int = 2
    layout: str = "cache"
    max_tokens: int = 1024
    temperature: float | None = None
    breakpoints: bool = False
    shared_first: bool = True  # cache layout: the notes go first for documents shorter than them (see below)
    notes_budget: int | None = None
    reuse: DocumentReuse | None = field(default=None, compare=False)  # what the replies say of the cache
    embed: Embed | None = field(default=None, compare=False)
    stats: SelectionStats | None = field(default=None, compare=False)
    on_done: Callable[[str], None] | None = field(default=None, compare=False)


def parse_note(text: str) -> str:
    """A note, or '' when the model said the document is irrelevant."""
    cleaned = text.strip()
    if cleaned.strip(" .*`\"'").upper() in {"NONE", "NONE."}:
        return ""
    return cleaned


async def read_document(
    llm: LLM, task: str, doc: Document, others: str | None, round_no: int, options: RelevanceOptions,
    shared_first: bool = False, probe: bool = False,
) -> str:
    """One relevance call: the note of `doc` for `task`, in light of `others` (formatted notes) if given.

    `shared_first` (cache layout): the instructions and notes go before the document (see
    `_read_with_notes`).
    """
    where = "above" if document_first(options.layout) and not shared_first else "below"
    instructions = render("relevance", task=task, others=others or "", max_words=max(50, options.max_tokens // 2),
                          where=where)
    request = ChatRequest(
        messages=document_messages(doc, instructions, options.layout, options.breakpoints, shared_first=shared_first),
        stage=STAGE,
        doc=doc.number,
        part=doc.part if doc.parts > 1 else None,
        round=round_no,
        max_tokens=options.max_tokens,
        temperature=options.temperature,
        prompt_name=instructions.name,
        prompt_hash=instructions.hash,
    )
    completion = await llm.complete(request)
    if options.reuse is not None and document_first(options.layout):
        prefix = SYSTEM_TOKENS + doc.tokens
        options.reuse.observe(completion.usage, prefix / (prefix + estimate_tokens(instructions.text)),
                              probe=probe)
    return parse_note(reply_text(completion))


def _query(task: str, doc: Document, previous: Mapping[str, str]) -> str:
    """What ranks the other notes for `doc`'s call: the task and its own last note."""
    return f"{task}\n{previous.get(doc.key, '')}"


def _notes_lead(task: str, doc: Document, previous: Mapping[str, str], choice: NotesChoice,
                options: RelevanceOptions) -> bool:
    """Cache layout: do the notes go before the document by themselves (see `_read_with_notes`)?"""
    # notes every call of the round shares: all of them (then in prefix order), or the selection for
    # the task alone, which every document without a note of its own gets byte for byte
    shared = not choice.selected or not previous.get(doc.key)
    return shared and shared_goes_first(options.layout, choice.tokens + estimate_tokens(task) + SHARED_OVERHEAD, doc,
                                        options.shared_first)


async def _read_with_notes(
    llm: LLM, task: str, doc: Document, previous: Mapping[str, str] | None, selector: NotesSelector | None,
    round_no: int, options: RelevanceOptions, choice: NotesChoice | None = None, notes_first: bool = False,
    probe: bool = False,
) -> str:
    """One relevance call; when it is too long for the window, again with half the notes, down to none.

    `choice`: the notes selected for the first try, when already made. `notes_first` (cache layout):
    the endpoint will not have kept this document's prefix since the round before (see
    `DocumentReuse`), so the notes lead, whatever they are: a neighbour's call may share some of
    them. `probe`: the call checks whether the cache kept its document, which therefore leads.

    Cache layout, when every other note fits the budget and they are longer than the document: the
    notes go first, in `prefix_order`, so that the calls of one round share most of their prefix
    (the notes are prefilled about once a round, and this short document again) instead of each
    call prefilling all the notes after its cached document. Same notes, another order. Likewise
    for a document without a note of its own when the notes are selected: its query is the task
    alone, so every such document gets the same selection, which then leads their prompts.
    """
    if selector is None or previous is None:
        return await read_document(llm, task, doc, None, round_no, options)
    query = _query(task, doc, previous)
    budget: int | None = None
    if choice is None:
        choice = await selector.select(query, exclude=doc.key, stage=STAGE)
    while True:
        first = not probe and ((notes_first and document_first(options.layout) and options.shared_first)
                               or _notes_lead(task, doc, previous, choice, options))
        notes = selector.shared_text(doc.key) if first and not choice.selected else choice.text
        try:
            note = await read_document(llm, task, doc, notes, round_no, options, shared_first=first, probe=probe)
        except ContextTooLong as exc:
            if budget == 0:
                raise ContextTooLong(f"document {doc.key} does not fit the context window even without notes; "
                                     "pass a smaller --part-tokens", status=exc.status, body=exc.body) from exc
            budget = shrink(budget, choice)
            choice = await selector.select(query, exclude=doc.key, budget=budget, stage=STAGE)
            continue
        if first and options.stats is not None:
            options.stats.placed_first(STAGE)  # the call that was answered, not each try
        return note


async def extract_relevance(
    llm: LLM, task: str, docs: Sequence[Document], options: RelevanceOptions | None = None
) -> RelevanceResult:
    """Run the relevance rounds over `docs`; a document whose call fails is recorded and skipped."""
    options = options or RelevanceOptions()
    rounds: list[Mapping[str, str]] = []
    failures: list[Failure] = []
    previous: Mapping[str, str] | None = None
    for round_no in range(1, options.rounds + 1):
        selector = None
        if previous is not None:
            selector = NotesSelector(note_refs(docs, previous), options.notes_budget, embed=options.embed,
                                     stats=options.stats)

        async def one(doc: Document, round_no: int = round_no, previous: Mapping[str, str] | None = previous,
                      selector: NotesSelector | None = selector, choice: NotesChoice | None = None,
                      notes_first: bool = False, probe: bool = False):
            try:
                note = await _read_with_notes(llm, task, doc, previous, selector, round_no, options,
                                              choice, notes_first, probe)
            except DOCUMENT_ERRORS as exc:  # only the document's own failure; anything else stops the run
                return doc, None, Failure(STAGE, doc.key, f"round {round_no}: {exc}", cause_of(exc))
            finally:
                if options.on_done:
                    options.on_done(STAGE)
            return doc, note, None

        order = call_order(docs, reverse=round_no % 2 == 0)
        if selector is None or previous is None or options.reuse is None or not document_first(options.layout):
            sent = await asyncio.gather(*(one(doc) for doc in order))
        else:
            # first a few calls spread over the round that keep their document first anyway, to learn how
            # much of the corpus the cache kept; then the others, placed by what they found
            choices = await asyncio.gather(*(selector.select(_query(task, doc, previous), exclude=doc.key,
                                                             stage=STAGE) for doc in order))
            probes = options.reuse.probe_positions(
                [i for i, doc in enumerate(order) if not _notes_lead(task, doc, previous, choices[i], options)])
            sent = await asyncio.gather(*(one(order[i], choice=choices[i], probe=True) for i in probes))
            kept = options.reuse.kept_positions(len(order))  # the first `kept` in call order are still cached
            sent += await asyncio.gather(*(one(doc, choice=choices[i], notes_first=i >= kept)
                                           for i, doc in enumerate(order) if i not in probes))
        by_key = {outcome[0].key: outcome for outcome in sent}
        notes: dict[str, str] = {}
        for doc, note, failure in (by_key[d.key] for d in docs):  # corpus order
            if failure is not None:
                failures.append(failure)
                if previous is not None and doc.key in previous:
                    notes[doc.key] = previous[doc.key]  # keep the last good note rather than lose it
            else:
                notes[doc.key] = note or ""
        rounds.append(MappingProxyType(notes))
        previous = notes
    return RelevanceResult(rounds=tuple(rounds), failures=tuple(failures))
