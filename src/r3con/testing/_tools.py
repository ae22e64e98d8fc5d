"""Generic scripted answers for OpenAI tool calling and for entity/triple schemas, from the request alone.

Tool calling (a request with `tools`): the scripted model calls each tool once, in the order they are
defined, one per turn, filling the arguments from the tool's JSON schema: a parameter about a path or
file takes a path-like word of the last tool result, `code` a short Python listing, an integer the
first number of the last tool result in range (a list of integers: the first two), any other string
(or list of strings) the question's words. Tools it cannot
fill are skipped; when none is left, or `tool_choice` is "none", it answers from the conversation.

Structured output whose schema's properties are all arrays of strings (entities) or arrays of string
arrays (triples): entities are the capitalised names and CJK terms of the last user message; triples
are the ones the prompt already lists as JSON (a filter keeps them) or else built from sentences that
name two entities. Nothing here is keyed to a prompt's wording or a corpus.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from . import _text as t
from ._reading import Reading

Messages = list[dict[str, Any]]
_CJK_TERM = re.compile(r"[\u4e00-\u9fff]{2,6}")
_PATHLIKE = re.compile(r"[\w\-.]+/[\w\-./]+|[\w\-]+\.(?:txt|md|json|csv)\b")
_NESTED = re.compile(r"\[\s*\[")


def _question(messages: Messages) -> str:
    first = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    return Reading.of_messages([{"role": "user", "content": first}]).task or first


def _keywords(messages: Messages) -> list[str]:
    """The question's names first, then its longest content words."""
    question = _question(messages)
    words = sorted(t.content_words(question), key=lambda w: (-len(w), w))
    return list(dict.fromkeys([*(n for n in t.names(question) if len(n) > 2), *words]))[:6] or ["the"]


def _called(messages: Messages) -> list[str]:
    return [str((c.get("function") or {}).get("name")) for m in messages if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []]


def _last_observation(messages: Messages) -> str:
    return next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "tool"), "")


def _fill(spec: dict[str, Any], messages: Messages) -> dict[str, Any] | None:
    """Arguments for a tool from its parameter schema, or None when a required one cannot be filled."""
    params = spec.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    observed = _last_observation(messages)
    out: dict[str, Any] = {}
    for name in params.get("required") or []:
        prop = props.get(name) or {}
        about = f"{name} {prop.get('description') or ''}".lower()
        if prop.get("type") == "integer":
            low, high = prop.get("minimum", -10**9), prop.get("maximum", 10**9)
            found = [int(x) for x in re.findall(r"\b\d+\b", observed) if low <= int(x) <= high]
            if not found:
                return None
            out[name] = found[0]
        elif prop.get("type") == "string" and name == "code":
            out[name] = "import os\nfor name in sorted(os.listdir('.')):\n    print(name, os.path.getsize(name))"
        elif prop.get("type") == "string" and ("path" in about or "file" in about):
            found = _PATHLIKE.findall(observed)
            if not found:
                return None
            out[name] = found[0]
        elif prop.get("type") == "string":
            out[name] = "|".join(_keywords(messages)) if "pattern" in about or "regex" in about \
                else " ".join(_keywords(messages))
        elif prop.get("type") == "array" and (prop.get("items") or {}).get("type") == "string":
            out[name] = _keywords(messages)
        elif prop.get("type") == "array" and (prop.get("items") or {}).get("type") == "integer":
            items = prop.get("items") or {}
            low, high = items.get("minimum", -10**9), items.get("maximum", 10**9)
            found = list(dict.fromkeys(int(x) for x in re.findall(r"\b\d+\b", observed) if low <= int(x) <= high))
            if not found:
                return None
            out[name] = found[:2]
        else:
            return None
    for name, prop in props.items():  # optional line ranges: a small window
        if name not in out and prop.get("type") == "integer" and ("line" in name or "end" in name):
            out[name] = 40 if "end" in name else 1
    return out


def tool_reply(body: dict[str, Any], messages: Messages) -> dict[str, Any]:
    """The assistant message for a tool-calling request: one tool call, or the answer."""
    called = _called(messages)
    if body.get("tool_choice") != "none":
        for i, tool in enumerate(body.get("tools") or []):
            spec = tool.get("function") or {}
            if tool.get("type") != "function" or spec.get("name") in called:
                continue
            arguments = _fill(spec, messages)
            if arguments is None:
                continue
            call = {"id": f"call_{len(called)}_{i}", "type": "function",
                    "function": {"name": spec["name"], "arguments": json.dumps(arguments, ensure_ascii=False)}}
            return {"role": "assistant", "content": None, "tool_calls": [call]}
    text = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "tool")
    found = t.related_sentences(text, _question(messages), k=5)
    names = sorted(set(t.names(" ".join(found))))[:10]
    summary = ", ".join(names) or (found[0][:200] if found else "no evidence found")
    return {"role": "assistant", "content": f"From {len(found)} findings: {' '.join(found)[:600]}\nAnswer: {summary}"}


def structured_kind(schema: dict[str, Any] | None) -> str | None:
    """'entities' or 'triples' for a schema whose properties are all string lists or lists of string lists."""
    props = (schema or {}).get("properties") or {}
    kinds = set()
    for prop in props.values():
        items = prop.get("items") or {} if prop.get("type") == "array" else None
        if items is None:
            return None
        if items.get("type") == "string":
            kinds.add("entities")
        elif items.get("type") == "array" and (items.get("items") or {}).get("type") == "string":
            kinds.add("triples")
        else:
            return None
    return kinds.pop() if len(kinds) == 1 else None


def entities(text: str, limit: int = 20) -> list[str]:
    """The text's capitalised names and frequent CJK terms, most frequent first."""
    counts = Counter(n for n in t.names(text) if len(n) > 2)
    counts.update(_CJK_TERM.findall(text))
    return [name for name, _ in counts.most_common(limit)]


def triples(text: str, limit: int = 20) -> list[list[str]]:
    """Triples listed in `text` as JSON, else (name, the words between, name) from sentences naming two."""
    listed = _listed_triples(text)
    if listed:
        return listed[:limit]
    out: list[list[str]] = []
    for sentence in t.sentences(text):
        named = list(dict.fromkeys(entities(sentence, 4)))
        if len(named) >= 2:
            a, b = named[0], named[1]
            start, end = sentence.find(a), sentence.find(b)
            between = sentence[min(start, end):max(start, end)]
            between = " ".join(between.replace(a, " ").replace(b, " ").split()[:5]) or "relates to"
            out.append([a, between, b])
        if len(out) >= limit:
            break
    return out


def _listed_triples(text: str) -> list[list[str]]:
    """Lists of three strings inside a JSON list of lists in `text`."""
    decoder = json.JSONDecoder()
    out: list[list[str]] = []
    for match in _NESTED.finditer(text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        out.extend(x for x in value if isinstance(x, list) and len(x) == 3 and all(isinstance(y, str) for y in x))
    return out


def structured_reply(messages: Messages, schema: dict[str, Any]) -> str:
    """A JSON reply for an entity or triple schema, from the last user message."""
    text = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
    kind = structured_kind(schema)
    out: dict[str, Any] = {}
    for name, prop in ((schema or {}).get("properties") or {}).items():
        limit = int(prop.get("maxItems") or 20)
        out[name] = entities(text, limit) if kind == "entities" else triples(text, limit)
    return json.dumps(out, ensure_ascii=False)
