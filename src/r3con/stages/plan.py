"""Where each of a stage's per-document calls puts its document, decided before the calls go out.

A call's prompt has the document and a part that other calls share (the relevance notes; the
populate task, schema and notes). Under the `cache` layout the document leads, so that its prefix,
cached when an earlier stage read it, is reused; the shared part leads instead when it is longer
than the document (then the endpoint prefills it once for all the calls that share it), or when
the endpoint's replies showed that it no longer keeps the documents' prefixes. The `paper` layout
always puts the instructions first. Stages carry out the plans made here, and `estimate` reads
the same plans, so an estimate places every call as the run would.

Bounded prefix caches (vLLM's and SGLang's hold what the GPU's memory leaves) may keep only the
documents sent last. So stages alternate call directions (`order`), and each relevance round from
the second on first sends a few probe calls spread over its order, among those that keep their
document first anyway, and reads in their replies how much of the corpus is still cached
(`CacheSeen`): that many calls, first in order, keep their document first; the rest put their
notes first, where neighbouring calls share them. When most probes found their document, or the
endpoint reports no cached tokens, nothing changes.

A document whose later calls are expected to lead with their shared part (`Placement.leads`: every
other note, at what a note is expected to take, fits the notes budget and outweighs it several times) keeps nothing
worth caching from round 1: its round-1 call leads with the instructions too, which every round-1 call
shares, so the endpoint prefills only the document; its later calls are then planned `cold`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..corpus.documents import Document
from .messages import SHARED_OVERHEAD, SYSTEM_TOKENS

if TYPE_CHECKING:
    from ..config import Settings

PROBES = 8  # probe calls a round
MIN_PROBES = 4  # fewer eligible calls than this: no probing, nothing changes
KEEP_ALL = 0.75  # this share of probes found or more: every call keeps its document first
HIT = 0.8  # a probe found its document when the cached tokens cover this share of the prompt up to its end
NOTE_TOKENS = 150  # a note's tokens before any is written (what `estimate` assumes of a note too)
# leading round 1 with the instructions saves their tokens once; a document led wrongly (its notes turn out
# shorter) is prefilled again by each later call: lead only where the notes expected outweigh it this many times
LEAD_MARGIN = 4


@dataclass(frozen=True)
class Placement:
    """The settings placement follows: layout, and the switches the bench turns off to measure them."""

    layout: str = "cache"
    shared_first: bool = True  # cache layout: a shared part longer than the document goes first
    alternate: bool = True  # stages send their calls in alternating directions
    adaptive: bool = True  # place calls by what probes found of the cache
    probes: bool = True  # send probes and read cached tokens (off under --batch: a round would be two jobs)

    @classmethod
    def of(cls, settings: Settings) -> Placement:
        """From `Settings` (layout, alternate_order, adaptive_placement, batch)."""
        return cls(layout=settings.layout, alternate=settings.alternate_order, adaptive=settings.adaptive_placement,
                   probes=not settings.batch)

    @property
    def document_first(self) -> bool:
        """Whether the layout puts the document before the stage's instructions (`cache`) or after (`paper`)."""
        return self.layout != "paper"

    def order(self, docs: Sequence[Document], reverse: bool) -> tuple[Document, ...]:
        """The documents in the order a stage sends their calls: backwards when `reverse` (and alternating).

        Relevance round 1 goes in corpus order, round 2 backwards, population the other way from the
        last round: each stage begins with the documents the one before sent last, which a bounded
        LRU prefix cache still holds; in one direction every stage would begin with those evicted first.
        """
        return tuple(reversed(docs)) if reverse and self.alternate else tuple(docs)

    def call(self, doc: Document, shared: Shared, *, probe: bool = False, cold: bool = False) -> CallPlan:
        """One call's layout: the shared part first when it is common to many calls and longer than the
        document, or when the document is `cold` (not cached since the last stage); never for a probe.
        Notes that lead go in `prefix_order` (every note, or a selection's in that order), where
        neighbouring calls share most."""
        first = (not probe and self.shared_first and self.document_first
                 and (cold or (shared.common and shared.tokens > doc.tokens)))
        return CallPlan(doc=doc, layout=self.layout, shared_first=first, probe=probe, cold=cold,
                        prefix_order=first)

    def leads(self, doc: Document, expected: Shared | None) -> bool:
        """Whether `doc`'s later calls are expected to lead with their shared part (`expected`, None:
        unknown), so that its first call should too: nothing of it is worth keeping cached. Not where the
        notes are expected to exceed the budget: each call's selection is its own, it shares little with
        its neighbour's whatever their order, and the document, cached by round 1, had better lead."""
        return (expected is not None and not expected.selected and self.shared_first and self.document_first
                and expected.tokens > LEAD_MARGIN * doc.tokens)

    def seen(self, call: CallPlan, cached_tokens: int, prompt_tokens: int, instructions_tokens: int) -> Seen:
        """What a reply said of the cache, as placement reads it: nothing where it reads no replies
        (under `--batch`, or when documents do not lead)."""
        if not (self.probes and self.document_first):
            return Seen(0, 0, 0.0)
        prefix = SYSTEM_TOKENS + call.doc.tokens
        return Seen(cached_tokens, prompt_tokens, prefix / (prefix + instructions_tokens), probe=call.probe)


def expected_shared(documents: int, notes_budget: int | None, task_tokens: int) -> Shared:
    """The notes part a later call is expected to have before any note is written: every other
    document's note at `NOTE_TOKENS`, within `notes_budget` (None: no budget), with the task; `selected`
    when they are expected not to fit it."""
    notes = max(0, documents - 1) * NOTE_TOKENS
    selected = bool(notes_budget) and notes > (notes_budget or 0)
    if notes_budget:
        notes = min(notes, notes_budget)
    return Shared(notes + task_tokens + SHARED_OVERHEAD, selected=selected)


@dataclass(frozen=True, slots=True)
class Shared:
    """The part of a call's prompt besides the document: its tokens, and whether other calls send it too."""

    tokens: int
    common: bool = True
    selected: bool = False  # the notes in it are a selection (not every note)


@dataclass(frozen=True, slots=True)
class CallPlan:
    """One call as planned: its document, and whether the shared part goes before it."""

    doc: Document
    layout: str = "cache"
    shared_first: bool = False
    probe: bool = False  # sent before the others, to learn whether the cache kept its document
    cold: bool = False  # the cache will not have kept the document: the shared part leads whatever it is
    prefix_order: bool = False  # the notes lead, in `notes.prefix_order` (a selection's too: `in_prefix_order`)

    @property
    def where(self) -> str:
        """Where the document is, as the instructions say it: "above" them or "below"."""
        return "below" if self.shared_first or self.layout == "paper" else "above"


@dataclass(frozen=True, slots=True)
class Seen:
    """What one call's reply said of the prefix cache."""

    cached_tokens: int
    prompt_tokens: int
    prefix_share: float  # the estimated share of the prompt up to the document's end
    probe: bool = False

    @property
    def hit(self) -> bool:
        return self.cached_tokens >= HIT * self.prefix_share * self.prompt_tokens


@dataclass(frozen=True)
class RoundPlacement:
    """How one probed round was placed, for the manifest."""

    probes: int
    kept: int
    document_first: int
    calls: int

    def to_dict(self) -> dict[str, int]:
        return {"probes": self.probes, "kept": self.kept, "document_first": self.document_first, "calls": self.calls}


@dataclass(frozen=True)
class CacheSeen:
    """What the endpoint's replies said of its prefix cache so far: whether it reports cached tokens at
    all, and how many of the last round's probes found their document."""

    reported: bool = False
    probes: int = 0
    hits: int = 0
    rounds: tuple[RoundPlacement, ...] = ()

    def seen(self, calls: Iterable[Seen]) -> CacheSeen:
        """With the replies of `calls` added."""
        reported, probes, hits = self.reported, self.probes, self.hits
        for s in calls:
            reported = reported or s.cached_tokens > 0
            if s.probe and s.prompt_tokens > 0:
                probes += 1
                hits += s.hit
        return replace(self, reported=reported, probes=probes, hits=hits)

    def kept_share(self, adaptive: bool = True) -> float:
        """The share of the last probes whose document was cached; 1 when the replies tell nothing."""
        if not adaptive or not self.reported or self.probes < MIN_PROBES:
            return 1.0
        return self.hits / self.probes

    def cold(self, adaptive: bool = True) -> bool:
        """Many probed documents had left the cache: population's documents, cached only from the last
        round's first calls, will have left it too."""
        return self.kept_share(adaptive) < KEEP_ALL

    def to_dict(self, adaptive: bool = True) -> dict[str, Any]:
        return {"endpoint_reports_cached_tokens": self.reported, "rounds": [r.to_dict() for r in self.rounds],
                "population_shared_first": self.cold(adaptive)}


@dataclass(frozen=True)
class RoundPlan:
    """A relevance round's calls in the order they go out: `probes` first, then `rest(seen)`, placed by
    what the probes found."""

    placement: Placement
    order: tuple[Document, ...]
    shared: tuple[Shared, ...]  # per call, in `order`
    probes: tuple[CallPlan, ...]
    adapts: bool  # the rest are placed by the probes (and the round recorded)
    lead: frozenset[str] = frozenset()  # the documents whose calls lead with their shared part from round 1 on

    def begin(self, seen: CacheSeen) -> CacheSeen:
        """`seen` as the round starts: a probed round counts only its own probes."""
        return replace(seen, probes=0, hits=0) if self.adapts else seen

    def kept(self, seen: CacheSeen) -> int:
        """How many calls, first in order, keep their document first: all when most probes found theirs
        (what the round's last calls would gain costs population more)."""
        n = len(self.order)
        share = seen.kept_share(self.placement.adaptive)
        return n if share >= KEEP_ALL else int(share * n)

    def rest(self, seen: CacheSeen) -> tuple[CallPlan, ...]:
        """The calls after the probes, each placed by where it is in the order and what `seen` says."""
        kept = self.kept(seen) if self.adapts else len(self.order)
        probed = {c.doc.key for c in self.probes}
        return tuple(self.placement.call(doc, shared, cold=i >= kept or doc.key in self.lead)
                     for i, (doc, shared) in enumerate(zip(self.order, self.shared, strict=True))
                     if doc.key not in probed)

    def recorded(self, seen: CacheSeen) -> CacheSeen:
        """`seen` with this round's placement added (a probed round only)."""
        if not self.adapts:
            return seen
        record = RoundPlacement(seen.probes, seen.hits, self.kept(seen), len(self.order))
        return replace(seen, rounds=(*seen.rounds, record))

    @property
    def calls(self) -> tuple[CallPlan, ...]:
        """Every call as placed when the probes find every document (what an estimate assumes)."""
        return (*self.probes, *self.rest(CacheSeen()))


def plan_round(placement: Placement, round_no: int, docs: Sequence[Document],
               shared: Sequence[Shared] | None = None, expected: Shared | None = None) -> RoundPlan:
    """Plan relevance round `round_no` over `docs` (corpus order); `shared`: per document, the notes part
    of its call (None in round 1, which has no notes); `expected`: the notes part a later call is expected
    to have before any note is written (`expected_shared`; None: the documents lead round 1)."""
    order = placement.order(docs, reverse=round_no % 2 == 0)
    lead = frozenset(doc.key for doc in order if placement.leads(doc, expected))
    if shared is None:  # round 1: the instructions lead where the document is not worth caching
        return RoundPlan(placement, order, tuple(Shared(0, common=False) for _ in order), (), adapts=False, lead=lead)
    by_key = {doc.key: s for doc, s in zip(docs, shared, strict=True)}
    parts = tuple(by_key[doc.key] for doc in order)
    adapts = placement.probes and placement.document_first
    probes: tuple[CallPlan, ...] = ()
    if adapts:
        eligible = [i for i, (doc, s) in enumerate(zip(order, parts, strict=True))
                    if doc.key not in lead and not placement.call(doc, s).shared_first]
        probes = tuple(placement.call(order[i], parts[i], probe=True) for i in probe_positions(eligible))
    return RoundPlan(placement, order, parts, probes, adapts, lead)


def probe_positions(eligible: Sequence[int]) -> list[int]:
    """The positions to probe: the middles of PROBES equal slices of `eligible` (calls that keep their
    document first anyway, so a cache holding the corpus loses nothing); none when fewer than MIN_PROBES."""
    m = len(eligible)
    if m < MIN_PROBES:
        return []
    k = min(PROBES, m)
    return sorted({eligible[(2 * j + 1) * m // (2 * k)] for j in range(k)})


def plan_populate(placement: Placement, docs: Sequence[Document], shared: Shared, seen: CacheSeen,
                  reverse: bool) -> tuple[CallPlan, ...]:
    """Population's calls in the order they go out: the same shared part for every document, first
    where it is longer than the document, or everywhere when the relevance probes found the cache cold."""
    cold = seen.cold(placement.adaptive)
    return tuple(placement.call(doc, shared, cold=cold) for doc in placement.order(docs, reverse))
