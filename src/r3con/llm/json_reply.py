"""Getting JSON out of model replies: bare, fenced, inside prose, or slightly broken (json-repair)."""

from __future__ import annotations

import json
import re
from typing import Any

import json_repair

from ..artifacts.jsonstream import nests_deeper

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", flags=re.DOTALL)


MAX_DEPTH = 64  # nesting a reply's JSON may have: records are a few levels deep; more is a hostile or broken reply


class NoJSON(ValueError):
    """The reply holds no JSON value we could recover."""


def depth(value: Any) -> int:
    """How deeply `value` nests lists and objects (0 for a scalar), found without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        stack.extend((child, level + 1) for child in children)
    return deepest


def loads(text: str, *, repair: bool = False) -> Any:
    """`text` as JSON (`repair`: through json-repair), nested at most MAX_DEPTH deep; NoJSON otherwise.

    A value nested thousands deep makes Python's parsers (and everything that walks the value after
    them) raise RecursionError, which is not a ValueError: it is turned into NoJSON here."""
    if nests_deeper(text, MAX_DEPTH):  # not parsed at all: thousands deep, the parser would raise RecursionError
        raise NoJSON(f"the JSON nests deeper than {MAX_DEPTH} levels")
    try:
        value = json_repair.loads(text) if repair else json.loads(text)
    except RecursionError:  # what the brackets did not tell (a broken string json-repair reads otherwise)
        raise NoJSON(f"the JSON nests deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise NoJSON(f"not JSON ({exc.msg})") from None
    if text.count("[") + text.count("{") > MAX_DEPTH and depth(value) > MAX_DEPTH:  # fewer brackets: not as deep
        raise NoJSON(f"the JSON nests deeper than {MAX_DEPTH} levels")
    return value


def extract_json(text: str) -> tuple[Any, bool]:
    """Return (value, repaired): the JSON object in `text`, and whether it needed repair."""
    text = text.strip()
    candidates = [m.group(1).strip() for m in _FENCE.finditer(text)]
    start = text.find("{")
    if start >= 0:
        end = text.rfind("}")
        candidates.append(text[start : end + 1] if end > start else text[start:])
    candidates.append(text)
    for candidate in candidates:
        try:
            value = loads(candidate)
        except NoJSON:
            continue
        if isinstance(value, dict):
            return value, False
    for candidate in candidates:
        if not candidate:
            continue
        try:
            value = loads(candidate, repair=True)
        except NoJSON:
            continue
        if isinstance(value, dict) and value:
            return value, True
    raise NoJSON("the reply contains no JSON object")
