"""What a reply cut at max_tokens still says: a note up to its last complete sentence, marked "(cut)";
a JSON reply repaired to the records it completed; a repetition loop stopped where it began.

Small models ramble and loop until max_tokens. Asking again with a larger budget mostly buys a longer
loop (docs/resilience.md), so a cut reply is kept for what
it holds instead (one with nothing complete in it is asked once more at the same budget), and one call
never asks for more than `max_tokens_cap` tokens.
"""

from __future__ import annotations

import json
import re

from .json_reply import NoJSON, loads

CUT_MARK = " (cut)"
_SENTENCE_END = re.compile(r"[.!?](?:[\"'”’)\]]*)(?=\s|$)|[。！？][」』”’）]*|\n")  # CJK ends need no space


def trim_loop(text: str, *, min_repeats: int = 3, max_period: int = 400) -> str:
    """`text` without a repeated tail: when its end is one unit said `min_repeats` times or more, the text
    up to the end of the unit's first time."""
    n = len(text)
    for period in range(1, min(max_period, n // min_repeats) + 1):
        unit = text[n - period:]
        if not unit.strip():
            continue
        if all(text[n - (k + 1) * period:n - k * period] == unit for k in range(1, min_repeats)):
            start = n - min_repeats * period
            while start >= period and text[start - period:start] == unit:
                start -= period
            return text[:start + period].rstrip()
    return text


def keep_text(text: str) -> str | None:
    """A cut free-text reply up to its last complete sentence, marked; None when no sentence completed."""
    text = trim_loop(text.rstrip())
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    if not ends:
        return None
    kept = text[:ends[-1]].rstrip()
    return kept + CUT_MARK if kept else None


def keep_json(text: str) -> str | None:
    """A cut JSON reply closed after the last array element it completed (json-repair closes the rest);
    None when it completed none and opened no array."""
    text = trim_loop(text)
    start = text.find("{")
    if start < 0:
        return None
    stack: list[str] = []
    safe = -1
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
            if ch == "[":
                safe = i + 1
        elif ch in "}]":
            if not stack:
                break
            stack.pop()
            if not stack:
                return text[start:i + 1]  # the value completed after all
            if stack[-1] == "[":
                safe = i + 1
    if safe < 0:
        return None
    try:
        value = loads(text[start:safe], repair=True)
    except NoJSON:
        return None
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else None
