"""Picking related sentences, words, names and numbers from text, and a rough token count."""

from __future__ import annotations

import re

STOP = set("""a an the and or of to in on at for by with from as is are was were be been it its this that these those
which who whom what when where why how did do does done many much more most any all each every other than then there
their they them he she his her him we you your our i me my not no yes if into out about over under after before during
between both either neither one two can could would should will shall may might must has have had so such also only
very own same again further once here please answer task question documents document""".split())
_WORD = re.compile(r"[A-Za-z\u00c0-\u024f][A-Za-z\u00c0-\u024f'-]+")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")
# Latin sentences end at . ! ? and white space; CJK ones at their full-width marks, with or without it.
_SENT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])\s*|\n+")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def content_words(text: str) -> set[str]:
    """Latin words that are not stop words (a plural's "s" dropped), and the character pairs of CJK runs
    (single CJK characters match too much, and CJK text has no spaces to find words by)."""
    out = set()
    for w in _WORD.findall(text.lower()):
        if w not in STOP and len(w) > 2:
            out.add(w[:-1] if w.endswith("s") and len(w) > 4 else w)
    for run in _CJK_RUN.findall(text):
        out.update(run[i:i + 2] for i in range(len(run) - 1))
    return out


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text) if len(s.strip()) > 3]


def related_sentences(text: str, query: str, k: int = 3) -> list[str]:
    q = content_words(query)
    scored = [(len(content_words(s) & q), i, s) for i, s in enumerate(sentences(text))]
    best = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], x[1]))[:k]
    return [s for _, _, s in sorted(best, key=lambda x: x[1])]


def numbers(text: str) -> list[float]:
    out = []
    for raw in _NUMBER.findall(text):
        try:
            out.append(float(raw.replace(",", "")))
        except ValueError:
            continue
    return out


def names(text: str) -> list[str]:
    found = re.findall(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*", text)
    return [n for n in found if n.lower() not in STOP]


def tokens(text: str) -> int:
    cjk = len(re.findall(r"[\u4e00-\u9fff]", text))
    return cjk + (len(text) - cjk) // 4 + 1
