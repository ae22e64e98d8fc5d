"""Word diffs between a note's rounds: the reinterpretation of a document is the method's core idea."""

from __future__ import annotations

import re
from difflib import SequenceMatcher

_TOKENS = re.compile(r"\s+|\w+|[^\w\s]")  # words, white space and punctuation apart: "Count." keeps "Count"


def word_diff(old: str, new: str) -> list[list[str]]:
    """`new` against `old` as [op, text] pieces, op "=" kept, "-" removed, "+" added (adjacent ops merged)."""
    if old == new:  # what the matcher gives a note kept as it was, without matching it word by word
        return [["=", new]] if new else []
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    pieces: list[list[str]] = []

    def add(op: str, tokens: list[str]) -> None:
        text = "".join(tokens)
        if not text:
            return
        if pieces and pieces[-1][0] == op:
            pieces[-1][1] += text
        else:
            pieces.append([op, text])

    for tag, i1, i2, j1, j2 in SequenceMatcher(str.isspace, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            add("=", b[j1:j2])
        else:
            add("-", a[i1:i2])
            add("+", b[j1:j2])
    return pieces


def changed_share(pieces: list[list[str]]) -> float:
    """The share of the new text's characters that were added (0 when nothing changed)."""
    total = sum(len(t) for op, t in pieces if op != "-")
    added = sum(len(t) for op, t in pieces if op == "+")
    return added / total if total else 0.0
