"""What the scripted server reads from a request: its headers, schema, tools and the prompt's structure.

The responders never look for a template's words or tag names, so a reworded template still gets a
sensible reply. A prompt is read by shape: sections are any `<name ...>` line up to its `</name>`; the
document is the section naming the `X-R3con-Doc` number (else the longest labelled section that is not
inside another, else the longest message); the task is the first section without attributes that is
not JSON; notes, pages and gists are the other labelled sections; JSON sections are a schema (an object
with "properties") or data (tables of records).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

# An opening tag at the start of a line, its attributes, and the same name's closing tag.
_SECTION = re.compile(r'^<([A-Za-z][\w-]*)((?:\s+[\w-]+="[^"]*")*)\s*>\n?(.*?)\n?</\1>', re.DOTALL | re.MULTILINE)
_ATTR = re.compile(r'([\w-]+)="([^"]*)"')


@dataclass(frozen=True)
class Section:
    """A tagged part of the prompt: its attribute values in order and its text."""

    attrs: tuple[str, ...]
    text: str
    nested: bool = False  # inside another section (a note among notes), not on its own

    @property
    def label(self) -> str:
        return self.attrs[0] if self.attrs else ""

    @property
    def title(self) -> str:
        return self.attrs[1] if len(self.attrs) > 1 else ""

    def json(self) -> Any:
        stripped = self.text.strip()
        if not stripped.startswith(("{", "[")):
            return None
        try:
            return json.loads(stripped)
        except (json.JSONDecodeError, RecursionError):  # a document of JSON nested too deep is a document
            return None


def _sections(text: str, nested: bool = False) -> list[Section]:
    """The innermost sections of `text`: a section whose text begins with a section is a container."""
    out: list[Section] = []
    for m in _SECTION.finditer(text):
        inner = m.group(3)
        if _SECTION.match(inner.lstrip()):
            out.extend(_sections(inner, nested=True))
        else:
            out.append(Section(tuple(v for _, v in _ATTR.findall(m.group(2))), inner, nested))
    return out


def plain_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """Messages whose content is a list of parts (Anthropic-style cache breakpoints) as plain text."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
        out.append({**message, "content": str(content or "")})
    return out


@dataclass(frozen=True)
class Reading:
    """One chat request as the scripted model sees it."""

    messages: tuple[Mapping[str, Any], ...]
    stage: str = ""
    mode: str = ""
    doc: str = ""
    round: int = 1
    schema: Mapping[str, Any] | None = None
    tools: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def of(cls, body: Mapping[str, Any], headers: Any = None) -> Reading:
        """Read a request body (as sent to /v1/chat/completions) and its X-R3con-* headers (any mapping)."""
        h = headers or {}
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None
        return cls(messages=tuple(plain_messages(list(body.get("messages") or []))),
                   stage=h.get("X-R3con-Stage") or "", mode=h.get("X-R3con-Mode") or "",
                   doc=h.get("X-R3con-Doc") or "", round=int(h.get("X-R3con-Round") or 1),
                   schema=schema, tools=tuple(body.get("tools") or ()))

    @classmethod
    def of_messages(cls, messages: list[dict[str, Any]], **fields: Any) -> Reading:
        return cls(messages=tuple(plain_messages(messages)), **fields)

    @cached_property
    def prompt(self) -> str:
        """What the user said (the system message sets a role and holds no data)."""
        return "\n".join(str(m["content"]) for m in self.messages if m.get("role") != "system")

    @cached_property
    def sections(self) -> list[Section]:
        return _sections(self.prompt)

    @cached_property
    def _document(self) -> Section | None:
        # a labelled section on its own; those inside another (notes, gists) are never the document
        candidates = [s for s in self.sections if s.attrs and not s.nested and s.json() is None]
        if self.doc:
            named = [s for s in candidates if self.doc in s.attrs or s.label.split(".")[0] == self.doc]
            if named:
                return max(named, key=lambda s: len(s.text))
        return max(candidates, key=lambda s: len(s.text)) if candidates else None

    @cached_property
    def document(self) -> str:
        """The document's text: its section, else the longest user message (a document sent on its own)."""
        if self._document is not None:
            return self._document.text
        users = [str(m["content"]) for m in self.messages if m.get("role") == "user"]
        return max(users, key=len) if users else ""

    @cached_property
    def document_label(self) -> str:
        return self._document.label if self._document is not None else self.doc

    @cached_property
    def plain_sections(self) -> list[str]:
        """Sections without attributes that are not JSON, in prompt order (the task first)."""
        return [s.text for s in self.sections if not s.attrs and s.json() is None]

    @cached_property
    def task(self) -> str:
        """The task: the first plain section; without one, everything the user said but the document."""
        if self.plain_sections:
            return self.plain_sections[0]
        return self.prompt.replace(self.document, " ") if self.document else self.prompt

    @cached_property
    def labelled(self) -> list[Section]:
        """Sections with attributes (documents, notes, pages, gists, texts), in prompt order."""
        return [s for s in self.sections if s.attrs and s.json() is None]

    @cached_property
    def notes(self) -> list[Section]:
        """The labelled sections other than the document."""
        return [s for s in self.labelled if s is not self._document]

    @cached_property
    def prompt_schema(self) -> dict[str, Any] | None:
        """A JSON Schema written into the prompt (an object with "properties")."""
        for s in self.sections:
            value = s.json()
            if isinstance(value, dict) and isinstance(value.get("properties"), dict):
                return value
        return None

    @cached_property
    def data(self) -> dict[str, list[dict[str, Any]]]:
        """Tables of records written into the prompt as JSON (a name to a list of objects)."""
        for s in self.sections:
            value = s.json()
            if (isinstance(value, dict) and value and "properties" not in value
                    and all(isinstance(v, list) for v in value.values())):
                return {k: [r for r in v if isinstance(r, dict)] for k, v in value.items()}
        return {}

    @cached_property
    def steps(self) -> int:
        """How many times the model has answered in this conversation."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")

