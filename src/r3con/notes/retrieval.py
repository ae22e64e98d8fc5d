"""Lexical and dense retrieval helpers: BM25 (Okapi), cosine ranking, rank fusion, budgeted selection.

Tokenisation is CJK-aware: Latin-script words (letters and digits) are lower-cased tokens, and each CJK
character is a token of its own, so Chinese documents (Loong) are searchable without a segmenter.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from ..tokens import CJK_RANGES

_TOKEN = re.compile(rf"[{CJK_RANGES}]|[^\W_{CJK_RANGES}]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; every CJK character is one token."""
    return _TOKEN.findall(text.lower())


class BM25:
    """Okapi BM25 over a fixed list of texts: `BM25(texts).scores(query)`, `.top_k(query, k)`.

    `k1` saturates term frequency, `b` normalises by length (Robertson and Zaragoza, 2009); the idf
    is the non-negative variant log(1 + (N - df + 0.5) / (df + 0.5)). Each term's weights are computed
    once, as a posting list, so a query costs one vector add per distinct query term. A query term
    counts as often as it occurs, or once with `distinct_query_terms`. `tokenize` turns a text into
    terms (`tokenize` of this module by default).
    """

    def __init__(self, texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75,
                 tokenize: Callable[[str], list[str]] = tokenize, distinct_query_terms: bool = False):
        self._index([Counter(tokenize(t)) for t in texts], k1, b, tokenize, distinct_query_terms)

    @classmethod
    def from_counts(cls, counts: Sequence[Mapping[str, int]], *, k1: float = 1.5, b: float = 0.75,
                    tokenize: Callable[[str], list[str]] = tokenize, distinct_query_terms: bool = False) -> BM25:
        """The index of texts given by their term counts (kept by the corpus store), as `BM25(texts)` would be;
        `tokenize` is the one the counts were made with (queries go through it)."""
        index = cls.__new__(cls)
        index._index(counts, k1, b, tokenize, distinct_query_terms)
        return index

    def _index(self, counts: Sequence[Mapping[str, int]], k1: float, b: float,
               tokenize: Callable[[str], list[str]], distinct_query_terms: bool) -> None:
        self._tokenize = tokenize
        self._distinct = distinct_query_terms
        self._first: tuple[str, set[str], np.ndarray] | None = None
        self.size = len(counts)
        lengths = np.array([sum(c.values()) for c in counts], dtype=float)
        avg = float(lengths.mean()) if self.size and lengths.sum() else 1.0
        norm = k1 * (1 - b + b * lengths / avg)
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for i, c in enumerate(counts):
            for term, n in c.items():
                where, freqs = postings.setdefault(term, ([], []))
                where.append(i)
                freqs.append(float(n))
        self._weights: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term, (where, freqs) in postings.items():
            idx = np.array(where, dtype=np.int64)
            tf = np.array(freqs)
            idf = math.log(1 + (self.size - len(where) + 0.5) / (len(where) + 0.5))
            self._weights[term] = (idx, idf * tf * (k1 + 1) / (tf + norm[idx]))

    def __len__(self) -> int:
        return self.size

    def scores(self, query: str) -> list[float]:
        """The BM25 score of every text for `query`, in the texts' order."""
        return self.score_array(query).tolist()

    def score_array(self, query: str) -> np.ndarray:
        """`scores(query)` as an array (no list of a float per text: for large indexes).

        With `distinct_query_terms`, the scores of a query's first line are kept for the next queries
        that start with it (a round's calls all start with the task): only the other lines' terms are
        added per query, the same sum in the same order of terms.
        """
        if not self._distinct or "\n" not in query:
            return self._add(np.zeros(self.size), Counter(self._tokenize(query)).items())
        first, _, rest = query.partition("\n")
        if self._first is None or self._first[0] != first:
            terms = dict.fromkeys(self._tokenize(first), 1)
            self._first = (first, set(terms), self._add(np.zeros(self.size), terms.items()))
        _, seen, base = self._first
        more = {t: 1 for t in self._tokenize(rest) if t not in seen}
        return self._add(base.copy(), more.items())

    def _add(self, total: np.ndarray, terms: Iterable[tuple[str, int]]) -> np.ndarray:
        for term, qf in terms:
            hit = self._weights.get(term)
            if hit is not None:
                total[hit[0]] += hit[1] if self._distinct else qf * hit[1]
        return total

    def top_k(self, query: str, k: int) -> list[int]:
        """Indices of the `k` best texts for `query`, best first (ties in text order)."""
        return ranking(self.scores(query))[:k]


def ranking(scores: Sequence[float]) -> list[int]:
    """Indices sorted by descending score; equal scores keep their order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def unit_rows(vectors: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """`vectors` as rows of length 1 (a zero vector stays zero), so that a dot product is their cosine."""
    matrix = np.asarray(vectors, dtype=float)
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def cosine_scores(query: Sequence[float], vectors: Sequence[Sequence[float]] | np.ndarray) -> list[float]:
    """Cosine similarity of `query` with each vector (0 for a zero vector); `vectors` may be `unit_rows` already."""
    if not len(vectors):
        return []
    return (unit_rows(vectors) @ unit_rows([query])[0]).tolist()


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
