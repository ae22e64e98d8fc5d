"""Helpers shared by the stages: per-document message layout, note formatting, reply cleaning."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._prompts import Rendered, render
from ..corpus import Document
from ..llm.types import Completion, Message


@dataclass(frozen=True)
class NoteRef:
    """A note as it appears in a prompt: labelled with its document number and title."""

    label: str
    title: str
    text: str


def document_messages(doc: Document, instructions: Rendered, layout: str,
                      breakpoints: bool = False) -> tuple[Message, ...]:
    """Messages for a per-document call.

    `cache` layout: shared system message, then the document, then the stage's instructions, so every
    call for one document starts with the same bytes and endpoints can reuse the cached prefix.
    With `breakpoints` (Anthropic-style caches), the document is its own user message marked as the
    end of the cacheable prefix. `paper` layout: instructions first, then the document.
    """
    system = render("reader_system").text
    body = render("document", doc=doc).text
    if layout == "paper":
        user = f"{instructions.text}\n\n{body}"
        return (Message("system", system), Message("user", user))
    if breakpoints:
        return (Message("system", system), Message("user", body, cache_breakpoint=True),
                Message("user", instructions.text))
    return (Message("system", system), Message("user", f"{body}\n\n{instructions.text}"))


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
