"""Lexical and dense retrieval helpers: BM25 (Okapi), cosine ranking, rank fusion, budgeted selection.

Tokenisation is CJK-aware: Latin-script words (letters and digits) are lower-cased tokens, and each CJK
character is a token of its own, so Chinese documents (Loong) are searchable without a segmenter.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

_CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK_RANGES}]|[^\W_{_CJK_RANGES}]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; every CJK character is one token."""
    return _TOKEN.findall(text.lower())


class BM25:
    """Okapi BM25 over a fixed list of texts: `BM25(texts).scores(query)`, `.top_k(query, k)`.

    `k1` saturates term frequency, `b` normalises by length (Robertson and Zaragoza, 2009); the idf
    is the non-negative variant log(1 + (N - df + 0.5) / (df + 0.5)).
    """

    def __init__(self, texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75):
        self.k1 = k1
        self.b = b
        self._docs = [Counter(tokenize(t)) for t in texts]
        self._lengths = [sum(c.values()) for c in self._docs]
        self._avg = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        df: Counter[str] = Counter()
        for counts in self._docs:
            df.update(counts.keys())
        n = len(self._docs)
        self._idf = {term: math.log(1.0 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}

    def __len__(self) -> int:
        return len(self._docs)

    def scores(self, query: str) -> list[float]:
        """The BM25 score of every text for `query`, in the texts' order."""
        terms = Counter(tokenize(query))
        out = []
        for counts, length in zip(self._docs, self._lengths, strict=True):
            norm = self.k1 * (1.0 - self.b + self.b * (length / self._avg if self._avg else 0.0))
            score = 0.0
            for term, qf in terms.items():
                tf = counts.get(term, 0)
                if tf:
                    score += qf * self._idf[term] * tf * (self.k1 + 1.0) / (tf + norm)
            out.append(score)
        return out

    def top_k(self, query: str, k: int) -> list[int]:
        """Indices of the `k` best texts for `query`, best first (ties in text order)."""
        return ranking(self.scores(query))[:k]


def ranking(scores: Sequence[float]) -> list[int]:
    """Indices sorted by descending score; equal scores keep their order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def cosine_scores(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    """Cosine similarity of `query` with each vector (0 for a zero vector)."""
    qn = math.sqrt(sum(x * x for x in query)) or 1.0
    out = []
    for vec in vectors:
        vn = math.sqrt(sum(x * x for x in vec)) or 1.0
        out.append(sum(a * b for a, b in zip(query, vec, strict=False)) / (qn * vn))
    return out


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], k: int = 60) -> list[int]:
    """Fuse rankings of the same items: score 1/(k + rank) summed over rankings (Cormack et al., 2009)."""
    fused: dict[int, float] = {}
    for order in rankings:
        for rank, item in enumerate(order, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=lambda i: (-fused[i], i))


def within_budget(order: Sequence[int], costs: Sequence[int], budget: int, limit: int | None = None) -> list[int]:
    """Items of `order`, in that order, while their `costs` fit in `budget` (at most `limit` items).

    An item too large for what is left is skipped and later, smaller ones are still considered.
    """
    chosen: list[int] = []
    used = 0
    for item in order:
        if limit is not None and len(chosen) >= limit:
            break
        if used + costs[item] <= budget:
            chosen.append(item)
            used += costs[item]
    return chosen
