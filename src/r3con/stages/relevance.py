"""Stage 1, relevance extraction: N rounds of task-focused notes, one call per document per round.

From round 2 on, each document is re-read with the previous round's notes of all OTHER documents
(never its own), labelled with their document numbers and titles. Rounds are barriers. When those
notes exceed the notes budget, the most relevant go in full and the rest as an index (`notes`);
a request refused as too long for the window is retried with half the notes, never cut silently.
Where each call puts its document is planned before the round's calls go out (`plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from ..corpus.documents import Document
from ..corpus.places import places_of
from ..llm.replies import reply_text
from ..llm.types import LLM, ChatRequest
from ..notes.keyed import SpooledNotes
from ..notes.selection import (
    Embed,
    NoteRefs,
    NotesChoice,
    NotesQuery,
    NotesSelector,
    PackedChoice,
    PlannedChoices,
    Queries,
    Selections,
    Selects,
    Shown,
    fitting,
    has_note,
    made_here,
)
from ..notes.shown import ShownLog
from ..prompts.render import render
from ..results import Failure
from ..tokens import estimate_tokens
from .fanout import fan_out
from .messages import SHARED_OVERHEAD, document_messages
from .plan import CacheSeen, CallPlan, Placement, RoundPlan, Seen, Shared, expected_shared, plan_round

STAGE = "relevance"


@dataclass(frozen=True)
class RelevanceResult:
    """Notes per round (document key -> note; '' means irrelevant), the documents that failed, and what
    the rounds saw: how the notes were selected and placed, and what the replies said of the cache."""

    rounds: tuple[Mapping[str, str], ...]
    failures: tuple[Failure, ...] = ()
    selections: Selections = Selections()
    cache: CacheSeen = CacheSeen()
    shown: tuple[ShownLog, ...] = ()  # per round from the second, what each answered read was shown (on disk)
    kept: tuple[frozenset[str], ...] = ()  # per round, the documents whose earlier note was kept (`keep`)
    stopped: bool = False  # `after_round` asked to stop: the rounds are to be planned again (a smaller window)

    @property
    def final(self) -> Mapping[str, str]:
        return self.rounds[-1] if self.rounds else MappingProxyType({})


Keep = Callable[[Document, int, Mapping[str, str] | None], str | None]
"""`keep(doc, round, top)`: the note an earlier run's read of `doc` wrote in `round`, to keep without a
call, or None to read it; `top`: the notes (key -> text) that rank first for the read (the
`RelevanceOptions.top` best by the notes ranking, `NotesChoice.top`; None in round 1)."""


@dataclass(frozen=True)
class RelevanceOptions:
    rounds: int = 2
    max_tokens: int = 1024
    temperature: float | None = None
    breakpoints: bool = False
    notes_budget: int | None = None
    placement: Placement = Placement()
    embed: Embed | None = field(default=None, compare=False)
    in_flight: int | None = None  # calls prepared at once (their prompts held); None: all (a batch needs them)
    keep: Keep | None = field(default=None, compare=False)  # an earlier run's note to keep instead of a read
    top: int = 0  # per later-round read, the notes that rank first for it, recorded (`Shown.top`) and given to `keep`
    # where a round's notes choices are made before its calls go out: elsewhere (`--engine ray`: on the workers,
    # over a copy of the round's notes), or None: here. Ranked by embeddings they are made here all the same
    # (a query's embedding is a call of this process's stack, and the notes' vectors are in its store)
    selects: Selects | None = field(default=None, compare=False)
    # calls of a later round that lead with their notes go out in this many chains, one call at a time each (as
    # many as the endpoint runs at once): a call then follows its neighbour in the notes' prefix order on the slot
    # that holds their shared prefix, where calls sent side by side would each prefill it (not under a batch)
    streams: int = 1
    # told each read's note as it is kept (the run's `note` events): the document, the round, the note
    on_note: Callable[[Document, int, str], None] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class _Read:
    """One document's call: what its reply said of the cache, and how its notes were chosen (its note goes to
    the round's `SpooledNotes` as the call returns, what it was shown to the round's `ShownLog`)."""

    seen: Seen
    selections: Selections
    kept: bool = False


def parse_note(text: str) -> str:
    """A note, or '' when the model said the document is irrelevant."""
    cleaned = text.strip()
    if cleaned.strip(" .*`\"'").upper() in {"NONE", "NONE."}:
        return ""
    return cleaned


async def extract_relevance(
    llm: LLM, task: str, docs: Sequence[Document], options: RelevanceOptions | None = None,
    after_round: Callable[[Sequence[Failure]], bool] | None = None,
) -> RelevanceResult:
    """Run the relevance rounds over `docs`; a document whose call fails is recorded and skipped.

    `after_round(failures)` sees each round's failures before the next round starts: it may raise (too
    many failed) or return True to stop here (the result is then `stopped`)."""
    options = options or RelevanceOptions()
    rounds: list[Mapping[str, str]] = []
    shown: list[ShownLog] = []
    kept: list[frozenset[str]] = []
    failures: list[Failure] = []
    selections, seen = Selections(), CacheSeen()
    previous: Mapping[str, str] | None = None
    warm: frozenset[str] | None = None
    for round_no in range(1, options.rounds + 1):
        round_ = _Round(llm, task, round_no, options, previous, docs, warm=warm)
        sent, seen = await round_.run(seen)
        warm = frozenset(round_.live)
        written = round_.written
        order: list[str] = []  # the keys with a note, in corpus order
        failed: list[Failure] = []
        for doc in docs:
            outcome = sent[doc.key]
            if isinstance(outcome, Failure):
                failed.append(outcome)
                if previous is None or doc.key not in previous:
                    continue
                written.add(doc.key, previous[doc.key])  # keep the last good note rather than lose it
            else:
                selections += outcome.selections
            order.append(doc.key)
        selections += round_.planned
        kept.append(frozenset(k for k, o in sent.items() if isinstance(o, _Read) and o.kept))
        del sent  # each read's outcome: not held through the next round's planning and calls
        # on disk since each read returned, in the parts' places: the next round reads them back from there
        notes = written.ordered(order)
        del order
        rounds.append(notes)
        failures += failed
        if previous is not None:
            shown.append(round_.log.order(d.key for d in docs))  # corpus order
        previous = notes
        if after_round is not None and after_round(failed):
            return RelevanceResult(rounds=tuple(rounds), failures=tuple(failures), selections=selections,
                                   cache=seen, shown=tuple(shown), kept=tuple(kept), stopped=True)
    return RelevanceResult(rounds=tuple(rounds), failures=tuple(failures), selections=selections, cache=seen,
                           shown=tuple(shown), kept=tuple(kept))


async def reread(llm: LLM, task: str, docs: Sequence[Document], notes: Mapping[str, str],
                 readers: Sequence[Document], round_no: int, options: RelevanceOptions) -> Mapping[str, str]:
    """One later round for `readers` alone, each seeing the `notes` of all `docs` as the round before:
    what `estimate --sample` asks of a few documents, with the notes a whole corpus would give them."""
    round_ = _Round(llm, task, round_no, options, notes, docs, readers)
    sent, _ = await round_.run(CacheSeen())
    return {key: round_.written[key] for key, outcome in sent.items() if isinstance(outcome, _Read)}


class _Round:
    """One relevance round: each document (of `readers`, all by default) re-read with the others' notes
    from the round before."""

    def __init__(self, llm: LLM, task: str, round_no: int, options: RelevanceOptions,
                 previous: Mapping[str, str] | None, docs: Sequence[Document],
                 readers: Sequence[Document] | None = None, warm: frozenset[str] | None = None):
        self.llm, self.task, self.round_no, self.options, self.previous = llm, task, round_no, options, previous
        self.warm = warm  # the documents whose last call reached the endpoint (None: any may be cached)
        self.live: set[str] = set()  # the documents whose call this round reached the endpoint
        self.readers = docs if readers is None else readers
        # the notes part a call is expected to have before any note is written: where it outweighs a document,
        # every call for it leads with its shared part (round 1 with the instructions), as `plan` says
        self.expected = expected_shared(len(docs), options.notes_budget, estimate_tokens(task))
        self.selector = None if previous is None else NotesSelector(
            NoteRefs(docs, previous), options.notes_budget, embed=options.embed)
        places = places_of(docs)  # the run's one dict of the parts' places, when `docs` are its `Parts`
        self.written = SpooledNotes(places=places)  # each read's note, on disk as the read returns
        self.choices = PlannedChoices(places)  # each read's, on disk from planning until its call goes out
        self.log = ShownLog(places)  # what each answered read was shown
        self.planned = Selections()  # the notes chosen for the round's calls before they go out

    async def plan(self) -> RoundPlan:
        """The round's calls, with each document's notes chosen first (their sizes decide the layout)."""
        if self.selector is None:
            return plan_round(self.options.placement, self.round_no, self.readers, expected=self.expected)
        selector, readers = self.selector, self.readers
        top, selects = self.options.top, self.options.selects
        shared: list[Shared | None] = [None] * len(readers)

        def planned(i: int, packed: PackedChoice) -> None:  # each as it is made: its size kept, itself on disk
            doc, choice = readers[i], selector.unpack(packed)
            shared[i] = self._shared(doc, choice)
            self.choices.add(doc.key, packed)
            self.planned += Selections(calls=1, selected=int(choice.selected))

        if selects is not None and selector.embed is None:  # made elsewhere: this selector ranks nothing here
            await selects.select_many(selector.refs, selector.budget, Queries(readers, self.query), planned)
        else:
            await made_here(readers, lambda d: selector.packed(self._query(d), exclude=d.key, top=top), planned)
        if any(s is None for s in shared):
            raise RuntimeError("a read's notes choice was not made")  # our bug: every query is answered or raises
        return plan_round(self.options.placement, self.round_no, self.readers, [s for s in shared if s is not None],
                          self.expected)

    async def run(self, seen: CacheSeen) -> tuple[dict[str, _Read | Failure], CacheSeen]:
        """The round's outcome per document key, and what the cache was seen to hold after it."""
        plan = await self.plan()
        seen = plan.begin(seen)
        probed = await self.send(plan.probes)  # first a few calls that learn how much of the corpus is cached
        seen = plan.recorded(seen.seen(r.seen for r in probed if isinstance(r, _Read)))
        later = plan.rest(seen)
        rest = await self.send(later)  # then the others, placed by what they found
        sent = dict(zip((c.doc.key for c in (*plan.probes, *later)), (*probed, *rest), strict=True))
        return sent, seen.seen(r.seen for r in rest if isinstance(r, _Read))

    async def send(self, calls: Sequence[CallPlan]) -> list[_Read | Failure]:
        streams, in_flight = self.options.streams, self.options.in_flight
        chains = (streams if streams > 1 and in_flight is not None and self.selector is not None
                  and any(c.prefix_order for c in calls) else None)
        return await fan_out(STAGE, calls, self._read, key=lambda call: call.doc.key, context=f"round {self.round_no}",
                             limit=in_flight, chains=chains)

    def _query(self, doc: Document) -> str:
        """What ranks the other notes for `doc`'s call: the task and its own last note."""
        return f"{self.task}\n{(self.previous or {}).get(doc.key, '')}"

    def query(self, doc: Document) -> NotesQuery:
        """`doc`'s read's selection to make (`Selects`)."""
        return NotesQuery(self._query(doc), doc.key, self.options.top)

    def _shared(self, doc: Document, choice: NotesChoice) -> Shared:
        """The notes part of `doc`'s call: common to the round's calls when it is every note (in prefix
        order), or the selection for the task alone, which every document without a note of its own gets."""
        common = not choice.selected or self.previous is None or not has_note(self.previous, doc.key)
        return Shared(choice.tokens + estimate_tokens(self.task) + SHARED_OVERHEAD, common, choice.selected)

    async def _read(self, call: CallPlan) -> _Read:
        """One call; when it is too long for the window, again with half the notes, down to none."""
        doc, selector = call.doc, self.selector
        planned = self.choices.pop(doc.key)  # kept on disk, by positions, while the round was planned
        first = None if planned is None or selector is None else selector.filled(selector.unpack(planned))
        top = first.top if first is not None else ()
        if self.options.keep is not None:
            ranked = None if first is None else {k: (self.previous or {})[k] for k in top}
            earlier = self.options.keep(doc, self.round_no, ranked)
            if earlier is not None:
                if first is not None:
                    self.log.add(Shown.of(doc.key, self.round_no, first, first.text, top=top))
                self._keep(doc, earlier)
                return _Read(Seen(0, 0, 0.0), Selections(), kept=True)
        if selector is None or first is None:
            return _Read(await self._ask(call, None), Selections())
        tries: list[NotesChoice] = []

        async def once(choice: NotesChoice) -> _Read:
            placed = call if choice is first else self.options.placement.call(
                doc, self._shared(doc, choice), probe=call.probe, cold=call.cold)
            notes = selector.prefix_text(choice, doc.key) if placed.prefix_order else choice.text
            seen = await self._ask(placed, notes)
            self.log.add(Shown.of(doc.key, self.round_no, choice, notes, refit=bool(tries), top=top))
            return _Read(seen, Selections(calls=len(tries), selected=sum(c.selected for c in tries),
                                          shared_first=int(placed.shared_first)))

        async def fewer(budget: int) -> NotesChoice:
            tries.append(await selector.select(self._query(doc), exclude=doc.key, budget=budget))
            return tries[-1]

        return await fitting(once, first, fewer, f"document {doc.key} does not fit the context window even "
                             "without notes; pass a smaller --part-tokens")

    async def _ask(self, call: CallPlan, others: str | None) -> Seen:
        """The note of `call.doc` for the task, in light of `others` (formatted notes) if given, written to the
        round's notes (`written`); what its reply said of the cache."""
        options, doc = self.options, call.doc
        instructions = render("relevance", task=self.task, others=others or "",
                              max_words=max(50, options.max_tokens // 2), where=call.where)
        completion = await self.llm.complete(ChatRequest(
            messages=document_messages(doc, instructions, call.layout, options.breakpoints,
                                       shared_first=call.shared_first),
            stage=STAGE, doc=doc.number, part=doc.part if doc.parts > 1 else None, round=self.round_no,
            max_tokens=options.max_tokens, temperature=options.temperature,
            prompt_name=instructions.name, prompt_hash=instructions.hash,
        ))
        usage = completion.usage
        if not completion.from_cache:
            self.live.add(doc.key)
        # what a reply says of the prefix cache is read as it was when the endpoint gave it: a replayed
        # reply's as recorded; a new one's only when the document's last call reached the endpoint too (a
        # read served from an earlier run never put its document in the cache, which a fresh run did)
        if completion.from_cache or self.warm is None or doc.key in self.warm:
            seen = options.placement.seen(call, usage.cached_tokens, usage.prompt_tokens,
                                          estimate_tokens(instructions.text))
        else:
            seen = Seen(0, 0, 0.0, probe=call.probe)
        self._keep(doc, parse_note(reply_text(completion)))
        return seen

    def _keep(self, doc: Document, note: str) -> None:
        self.written.add(doc.key, note)
        if self.options.on_note is not None:
            self.options.on_note(doc, self.round_no, note)
