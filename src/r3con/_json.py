"""Getting JSON out of model replies: bare, fenced, inside prose, or slightly broken (json-repair)."""

from __future__ import annotations

import json
import re
from typing import Any

import json_repair

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", flags=re.DOTALL)


class NoJSON(ValueError):
    """The reply holds no JSON value we could recover."""


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
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value, False
    for candidate in candidates:
        if not candidate:
            continue
        value = json_repair.loads(candidate)
        if isinstance(value, dict) and value:
            return value, True
    raise NoJSON("the reply contains no JSON object")
