"""Folding a text for tolerant comparison: what a copying model changes without changing the meaning.

White space, hyphens and dashes (a model writes "--" for "—" or joins "some-\nthing"), quotation marks
(curly or straight, or left out), thousands separators (1,250,000 = 1 250 000 = 1250000) are dropped;
"per cent" after a number is "%"; Unicode compatibility forms (full-width punctuation, ligatures, "…")
and case are folded. Folding keeps, for each folded character, the index of the original character it
came from, so a span found in the folded text maps back to the original.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

_CJK_PUNCT = {ord("。"): ".", ord("、"): ","}  # the CJK full stop and comma, which NFKC keeps
# Hyphens and dashes (a model writes "--" for "—" or joins "some-\nthing") and quotation marks (curly or
# straight, or left out: 'he said "no"' for 'he said “no”' or 'he said no') are dropped.
MARKS = frozenset("'‘’‚‛′`´" '"“”„‟″«»「」『』')
_DROPPED = frozenset("-‐‑‒–—―−\u00ad") | MARKS
_PERCENT_WORDS = re.compile(r"(?<=\d)\s*per\s?cent(?![a-z])", re.IGNORECASE)
PARTICLES = frozenset("的之了地得")  # CJK particles a copying model drops or adds without changing the meaning
_GROUPING = re.compile(r"(?<=\d)[,'，](?=\d{3}(?!\d))")  # thousands separators: 1,250,000 = 1 250 000 = 1250000


def fold(text: str) -> tuple[str, tuple[int, ...]]:
    """`text` folded for tolerant comparison, and for each folded character the index it came from."""
    if text.isascii() and not ("cent" in text or "CENT" in text):
        return _fold_ascii(text)
    out: list[str] = []
    index: list[int] = []
    memo: dict[str, str] = {}
    grouping = {m.start() for m in _GROUPING.finditer(text)} if any(c in text for c in ",'，") else set()
    percent: dict[int, int] = {}  # "5 per cent" is "5%": where the words begin, and end
    if "cent" in text or "CENT" in text:
        percent = {m.start(): m.end() for m in _PERCENT_WORDS.finditer(text)}
    skip_to = 0
    for i, c in enumerate(text):
        if i < skip_to or i in grouping:
            continue
        if i in percent:
            out.append("%")
            index.append(i)
            skip_to = percent[i]
            continue
        folded = memo.get(c)
        if folded is None:
            if c.isspace() or c in _DROPPED or unicodedata.category(c) == "Cf":
                folded = ""
            else:
                norm = unicodedata.normalize("NFKC", c).casefold().translate(_CJK_PUNCT)
                folded = "".join(d for d in norm if not d.isspace() and d not in _DROPPED)
            memo[c] = folded
        for d in folded:
            out.append(d)
            index.append(i)
    return "".join(out), tuple(index)


# ASCII folds a character at a time to itself lower-cased or to nothing (NFKC leaves it, casefold is lower):
# which it keeps, as a table for numpy; `fold` reads a document's text once a population call
_ASCII_KEPT = np.array([not (chr(c).isspace() or chr(c) in _DROPPED) for c in range(128)])


def _fold_ascii(text: str) -> tuple[str, tuple[int, ...]]:
    """`fold` of an ASCII `text` without "per cent" in it, with numpy rather than a Python step a character."""
    raw = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    kept = _ASCII_KEPT[raw]
    if any(c in text for c in ",'"):
        kept[[m.start() for m in _GROUPING.finditer(text)]] = False
    index = np.flatnonzero(kept)
    return raw[index].tobytes().decode("ascii").lower(), tuple(index.tolist())
