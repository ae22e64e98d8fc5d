"""Helpers shared by the stages: per-document message layout, note formatting."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from .._prompts import Rendered, render
from ..corpus import Document
from ..llm.types import Message, Usage
from ..tokens import estimate_tokens


@dataclass(frozen=True)
class NoteRef:
    """A note as it appears in a prompt: labelled with its document number and title."""

    label: str
    title: str
    text: str


def document_first(layout: str) -> bool:
    """Whether `layout` puts the document before the stage's instructions (`cache`) or after them (`paper`)."""
    return layout != "paper"


SHARED_OVERHEAD = 120  # tokens of a stage's instructions besides the task, schema and notes (an estimate)
SYSTEM_TOKENS = estimate_tokens(render("reader_system").text)  # the per-document calls' system message

# Switches bench/bench_scale.py turns off to measure what each saves; always on otherwise.
ALTERNATE = True  # stages send their calls in alternating directions (`call_order`)
ADAPTIVE = True  # stages place each call by how much of the corpus the cache kept (`DocumentReuse`)


def shared_goes_first(layout: str, shared_tokens: int, doc: Document, enabled: bool = True,
                      cold: bool = False) -> bool:
    """Cache layout: put a part many calls share (task, schema, notes) before the document?

    Yes when it is longer than the document: the endpoint then prefills it once for all the calls
    that share it (and the document again) instead of prefilling it in every call, after the
    document's cached prefix. Yes too when `cold`: the endpoint's replies showed that it does not
    keep the documents' prefixes from one stage to the next (`DocumentReuse.cold`), so the document
    is prefilled again wherever it goes and only the shared part can come from the cache. The paper
    layout always puts it first.
    """
    return enabled and document_first(layout) and (shared_tokens > doc.tokens or cold)


@dataclass
class DocumentReuse:
    """How much of the corpus the endpoint's prefix cache keeps from one stage to the next, from its replies.

    The cache layout bets that a document's prefix is still cached when the next stage reads it. A
    bounded cache (vLLM's and SGLang's hold what the GPU's memory leaves) may keep only the documents
    the stage before sent last. Each relevance round from the second on therefore first sends a few
    probe calls spread over its call order (`probe_positions`), among those that put their document
    first anyway (so that a cache holding the corpus loses nothing to them), and checks their
    replies (`observe`): were the cached tokens at least as long as the system message and the
    document? The share that was (`kept_share`) says how far into the round's call order documents
    are still cached (the order alternates, so the kept ones come first): those calls keep the
    document first, the rest put their notes first, where neighbouring calls can share them
    (`kept_positions`). Population then puts its shared part first (`cold`). When most probes
    found their document (KEEP_ALL), nothing changes. Nor does it when the endpoint reports no
    cached tokens: every call keeps its document first. Decisions are taken before a stage's calls
    go out, from probes whose answers a resumed run takes from its response cache with the usage
    they had, so it places every call as the first run did.
    """

    probes: int = 0  # this round's probe calls
    hits: int = 0  # of them, those whose reported cached tokens covered the document
    reported: bool = False  # the endpoint reported cached tokens on some call
    rounds: list[dict[str, int]] = field(default_factory=list)  # per probed round, for the manifest
    PROBES: ClassVar[int] = 8
    MIN_PROBES: ClassVar[int] = 4  # fewer documents than this: no adapting
    KEEP_ALL: ClassVar[float] = 0.75  # this share of probes kept or more: every call keeps its document first

    def probe_positions(self, eligible: Sequence[int]) -> list[int]:
        """The positions in a round's call order to probe first, spread over `eligible` ones (the calls
        that keep their document first anyway): the middles of PROBES equal slices of them; none when
        fewer than MIN_PROBES are eligible."""
        self.probes = self.hits = 0
        m = len(eligible)
        if m < self.MIN_PROBES:
            return []
        k = min(self.PROBES, m)
        return sorted({eligible[(2 * j + 1) * m // (2 * k)] for j in range(k)})

    def observe(self, usage: Usage, prefix_share: float, *, probe: bool) -> None:
        """Record one call's reply: `prefix_share` is the estimated share of its prompt up to the document's end."""
        if usage.cached_tokens > 0:
            self.reported = True
        if probe and usage.prompt_tokens > 0:
            self.probes += 1
            self.hits += usage.cached_tokens >= 0.8 * prefix_share * usage.prompt_tokens

    def kept_share(self) -> float:
        """The share of the last probes whose document was cached; 1 when the replies tell nothing."""
        if not ADAPTIVE or not self.reported or self.probes < self.MIN_PROBES:
            return 1.0
        return self.hits / self.probes

    def kept_positions(self, n: int) -> int:
        """How many of a round's n calls, first in call order, keep the document first.

        All of them when the probes found most documents (KEEP_ALL of them or more): the cache then
        holds nearly the corpus, and what the round's last calls would gain with their notes first
        costs population more, whose documents stay cached only behind the system message.
        """
        kept = self.kept_share()
        first = n if kept >= self.KEEP_ALL else int(kept * n)
        self.rounds.append({"probes": self.probes, "kept": self.hits, "document_first": first, "calls": n})
        return first

    def cold(self) -> bool:
        """Many probed documents had left the cache: population puts its shared part first.

        Its documents would be cached only from the last round's calls that put them first, the
        round's earliest, and the calls after them, with their notes first, have filled the cache since.
        """
        return self.kept_share() < self.KEEP_ALL

    def to_dict(self) -> dict[str, object]:
        return {"endpoint_reports_cached_tokens": self.reported, "rounds": self.rounds,
                "population_shared_first": self.cold()}


def document_messages(doc: Document, instructions: Rendered, layout: str, breakpoints: bool = False,
                      *, shared_first: bool = False) -> tuple[Message, ...]:
    """Messages for a per-document call.

    `cache` layout: shared system message, then the document, then the stage's instructions, so every
    call for one document starts with the same bytes and endpoints can reuse the cached prefix.
    `shared_first` (cache layout): the instructions are (nearly) the same for every document of the
    stage (population: task, schema, notes; relevance: the notes, see `relevance._read_with_notes`)
    and longer than the document, so they go first, to be prefilled once for all documents instead
    of once each. With `breakpoints` (Anthropic-style caches),
    the cacheable prefix is its own user message marked as its end. `paper` layout: instructions
    first, then the document. The instructions must be rendered with `where` = "above" when the
    document comes first and "below" otherwise (see `document_first`).
    """
    system = render("reader_system").text
    body = render("document", doc=doc).text
    if layout == "paper" or shared_first:
        if breakpoints and shared_first:
            return (Message("system", system), Message("user", instructions.text, cache_breakpoint=True),
                    Message("user", body))
        return (Message("system", system), Message("user", f"{instructions.text}\n\n{body}"))
    if breakpoints:
        return (Message("system", system), Message("user", body, cache_breakpoint=True),
                Message("user", instructions.text))
    return (Message("system", system), Message("user", f"{body}\n\n{instructions.text}"))


def call_order(docs: Sequence[Document], reverse: bool) -> list[Document]:
    """The documents in the order a stage sends their calls: backwards when `reverse` (and ALTERNATE).

    Stages alternate: relevance round 1 in corpus order, round 2 backwards, population the other way
    from the last round. Each stage then begins with the documents the one before sent last, whose
    prefixes a bounded LRU prefix cache (vLLM's, SGLang's, llama.cpp's host-memory cache) still
    holds when it cannot hold the whole corpus; in one direction every stage would begin with the
    documents evicted first, and evict each next one just before it is needed. Stages report their
    results in corpus order either way.
    """
    return list(reversed(docs)) if reverse and ALTERNATE else list(docs)


def note_refs(docs: Sequence[Document], notes: Mapping[str, str], exclude: str | None = None) -> list[NoteRef]:
    """Non-empty notes of `docs` in corpus order, without the note of `exclude` (a document key)."""
    refs = []
    for doc in docs:
        text = notes.get(doc.key, "")
        if doc.key != exclude and text:
            refs.append(NoteRef(label=doc.key, title=doc.title, text=text))
    return refs


def format_notes(refs: Sequence[NoteRef]) -> str:
    if not refs:
        return "<notes>\n(no document was found relevant)\n</notes>"
    return render("notes", notes=refs).text
