"""The messages of a per-document call: the shared system message, the document and the stage's instructions."""

from __future__ import annotations

from ..corpus.documents import Document
from ..llm.types import Message
from ..prompts.render import Rendered, render
from ..tokens import estimate_tokens

SHARED_OVERHEAD = 120  # tokens of a stage's instructions besides the task, schema and notes (an estimate)
SYSTEM_TOKENS = estimate_tokens(render("reader_system").text)  # the per-document calls' system message


def document_messages(doc: Document, instructions: Rendered, layout: str, breakpoints: bool = False,
                      *, shared_first: bool = False) -> tuple[Message, ...]:
    """Messages for a per-document call.

    `cache` layout: shared system message, then the document, then the stage's instructions, so every
    call for one document starts with the same bytes and endpoints can reuse the cached prefix.
    `shared_first` (cache layout): the instructions are (nearly) the same for every document of the
    stage (population: task, schema, notes; relevance: the notes) and go first (see `plan`), to be
    prefilled once for all documents instead of once each. With `breakpoints` (Anthropic-style caches),
    the cacheable prefix is its own user message marked as its end. `paper` layout: instructions
    first, then the document. The instructions must be rendered with `where` = "above" when the
    document comes first and "below" otherwise (`CallPlan.where`).
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


RETRY_EXCERPT_CHARS = 300  # characters of a failed reply a re-ask quotes (not the whole reply: it may be thousands of tokens)


def reply_excerpt(reply: str) -> str:
    """The start of a failed reply, for a re-ask that says what was wrong with it without sending it all again."""
    text = " ".join(reply.split())
    return text if len(text) <= RETRY_EXCERPT_CHARS else text[:RETRY_EXCERPT_CHARS] + " ..."
