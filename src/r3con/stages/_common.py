"""Helpers shared by the stages: per-document message layout, note formatting, reply cleaning."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from .._prompts import Rendered, render
from ..corpus import Document
from ..llm.types import Completion, Message, Usage
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
    """Whether the endpoint serves a document's prefix from its cache when a later stage reads it again.

    The cache layout bets that it does. Relevance calls from round 2 on that put their document first
    are checked against what the reply reports (`observe`): was the cached part at least as long as
    the system message and the document? A bounded cache that cannot hold the corpus from one stage
    to the next answers no, and later stages then put their shared part first (`cold`). An endpoint
    that reports no cached tokens at all tells nothing, and nothing changes. Stages read `cold()` once,
    when they start, so that a resumed run (whose answered calls come from the response cache with
    the usage they had) places every call as the first run did.
    """

    checked: int = 0  # document-first calls that read their document a second time or later
    hits: int = 0  # of them, those whose reported cached tokens covered the document
    reported: bool = False  # the endpoint reported cached tokens on some call
    MIN_CHECKS: ClassVar[int] = 8

    def observe(self, usage: Usage, prefix_share: float, *, reread: bool) -> None:
        """Record one call's reply: `prefix_share` is the estimated share of its prompt up to the document's end."""
        if usage.cached_tokens > 0:
            self.reported = True
        if reread and usage.prompt_tokens > 0:
            self.checked += 1
            self.hits += usage.cached_tokens >= 0.8 * prefix_share * usage.prompt_tokens

    def cold(self) -> bool:
        """Documents were mostly not served from the cache on a second reading, by an endpoint that reports it."""
        return ADAPTIVE and self.reported and self.checked >= self.MIN_CHECKS and self.hits * 2 < self.checked

    def to_dict(self) -> dict[str, int | bool]:
        return {"checked_calls": self.checked, "document_served_from_cache": self.hits,
                "endpoint_reports_cached_tokens": self.reported, "cold": self.cold()}


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


# Switches bench/bench_scale.py turns off to measure what each saves; always on otherwise.
ALTERNATE = True  # stages send their calls in alternating directions (`call_order`)
ADAPTIVE = True  # later stages put their shared part first when documents were not kept (`DocumentReuse.cold`)


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


_THINK = re.compile(r"<think>.*?</think>", flags=re.DOTALL)


def reply_text(completion: Completion) -> str:
    """The reply without thinking blocks; falls back to reasoning content when content is empty."""
    text = _THINK.sub("", completion.content or "")
    if "<think>" in text:  # unterminated thinking: the answer, if any, follows no closing tag
        text = ""
    text = text.strip()
    if not text and completion.reasoning:
        text = completion.reasoning.strip()
    return text
