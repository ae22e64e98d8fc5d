"""Lexical and dense retrieval helpers: BM25 (Okapi), cosine ranking, rank fusion, budgeted selection.

Tokenisation is CJK-aware: Latin-script words (letters and digits) are lower-cased tokens, and each CJK
character is a token of its own, so Chinese documents (Loong) are searchable without a segmenter.
"""

from __future__ import annotations

import math
import re
from array import array
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

    def __init__(self, texts: Iterable[str], *, k1: float = 1.5, b: float = 0.75,
                 tokenize: Callable[[str], list[str]] = tokenize, distinct_query_terms: bool = False):
        self._index((Counter(tokenize(t)) for t in texts), k1, b, tokenize, distinct_query_terms)

    @classmethod
    def from_counts(cls, counts: Sequence[Mapping[str, int]], *, k1: float = 1.5, b: float = 0.75,
                    tokenize: Callable[[str], list[str]] = tokenize, distinct_query_terms: bool = False) -> BM25:
        """The index of texts given by their term counts (kept by the corpus store), as `BM25(texts)` would be;
        `tokenize` is the one the counts were made with (queries go through it)."""
        index = cls.__new__(cls)
        index._index(counts, k1, b, tokenize, distinct_query_terms)
        return index

    def _index(self, counts: Iterable[Mapping[str, int]], k1: float, b: float,
               tokenize: Callable[[str], list[str]], distinct_query_terms: bool) -> None:
        # The postings in two flat arrays, grouped by term (`_terms`: term -> its number, `_starts`: where
        # each term's run begins), not two arrays per term: at 10^6 notes of a large vocabulary the arrays'
        # headers and the lists they were built from were most of the index. Each weight is the same sum
        # in the same order of operations as one term at a time gives, so the scores are equal to the bit.
        self._tokenize = tokenize
        self._distinct = distinct_query_terms
        self._first: tuple[str, set[str], np.ndarray] | None = None
        self._terms: dict[str, int] = {}
        term_of, doc_of, freq_of, lengths = array("i"), array("i"), array("d"), array("d")  # 4-byte numbers: 2^31 notes
        size = 0
        for i, c in enumerate(counts):
            for term, n in c.items():
                term_of.append(self._terms.setdefault(term, len(self._terms)))
                doc_of.append(i)
                freq_of.append(float(n))
            lengths.append(float(sum(c.values())))
            size = i + 1
        self.size = size
        length = np.frombuffer(lengths, dtype=float) if size else np.zeros(0)
        avg = float(length.mean()) if size and length.sum() else 1.0
        norm = k1 * (1 - b + b * length / avg)
        terms = np.frombuffer(term_of, dtype=np.intc)
        order = np.argsort(terms, kind="stable")  # each term's documents ascending
        df = np.bincount(terms, minlength=len(self._terms))
        del terms, term_of
        self._starts = np.concatenate(([0], np.cumsum(df)))
        idf = np.array([math.log(1 + (size - n + 0.5) / (n + 0.5)) for n in df.tolist()])  # as math.log gives it
        docs = np.frombuffer(doc_of, dtype=np.intc)[order]
        del doc_of
        tf = np.frombuffer(freq_of, dtype=float)[order]
        del order, freq_of
        self._docs = docs
        self._weights = np.repeat(idf, df) * tf * (k1 + 1) / (tf + norm[docs])

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
        starts = self._starts
        for term, qf in terms:
            number = self._terms.get(term)
            if number is not None:
                lo, hi = starts[number], starts[number + 1]
                weights = self._weights[lo:hi]
                total[self._docs[lo:hi]] += weights if self._distinct else qf * weights
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
