"""How a selector ranks the notes for a call: BM25 over their words (`terms`, `notes_bm25`), read only as far
as the budget lasts (`Ranked`, `best_positions`); and the order that lets calls for nearby documents share a prefix
(`prefix_order`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

from ..tokens import CJK_CHAR
from .retrieval import BM25

_WORD = re.compile(r"[^\W\d_][^\W_]*|\d+", re.UNICODE)
_STOP = frozenset(
    "a an the and or of to in on at for by with from as is are was were be been it its this that these those "
    "which who what when where how not no he she his her they them their we you i".split()
)


def terms(text: str) -> list[str]:
    """Lower-cased words without stop words; CJK runs become characters and character bigrams."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if CJK_CHAR.search(word):
            chars = [c for c in word if not c.isspace()]
            out.extend(chars)
            out.extend(a + b for a, b in zip(chars, chars[1:], strict=False))
        elif word not in _STOP and len(word) > 1:
            out.append(word)
    return out


def notes_bm25(texts: Iterable[str]) -> BM25:
    """The BM25 index notes are ranked with: `terms` (stop words out, CJK bigrams), k1 = 1.2, each query
    term counted once."""
    return BM25(texts, k1=1.2, tokenize=terms, distinct_query_terms=True)


def prefix_order(count: int, own: int | None) -> list[int]:
    """Positions 0..count-1 without `own`, ordered so that calls for nearby documents share long prefixes.

    Halve the range: the half without `own` comes first, in corpus order, then the same within the
    half that holds it, down to `own`. Two documents' orders agree up to the level where their
    halves part, so a prefix cache holds all but a few of the notes for each call after the first,
    where corpus order (which every call breaks at its own position) shares half of them on average.
    """
    if own is None:
        return list(range(count))
    out: list[int] = []
    lo, hi = 0, count
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if own < mid:
            out.extend(range(mid, hi))
            hi = mid
        else:
            out.extend(range(lo, mid))
            lo = mid
    return out


BLOCK = 256  # notes ranked at a time, among those that still fit


_SAMPLED = 8  # `best_positions` over more than this many times `size` positions narrows them from a sample first
_GOLDEN = (5 ** 0.5 - 1) / 2  # the sample's offsets, j * _GOLDEN mod 1: spread evenly, periodic in nothing


def best_positions(scores: np.ndarray, among: np.ndarray | None, size: int) -> np.ndarray:
    """The best `size` positions of `among` (ascending; None: every position) by descending score, ties in
    position order, with every tie of the last one: a prefix of their ranking, found with a partition and
    a sort of it alone.

    Over many positions, a score from each run of `step` gives a floor that about `2 * size` clear: the
    partition then runs over those only (one comparison a note, and a partition of a few times `size`).
    The floor is at or below the size-th best score whenever at least `size` clear it (checked), so the
    result is the one a partition of every position gives; when too few clear it, they all go in."""
    values = scores if among is None else scores[among]
    n = len(values)
    if n > size:
        where = None
        if n > _SAMPLED * size:
            clear = np.flatnonzero(values >= _floor(values, size))
            if len(clear) >= size:
                where = clear
        top = values if where is None else values[where]
        cut = np.partition(top, len(top) - size)[len(top) - size]  # the size-th best score
        kept = np.flatnonzero(values >= cut) if where is None else where[top >= cut]
        values = values[kept]
        positions = kept if among is None else among[kept]
    else:
        positions = np.arange(n) if among is None else among
    return positions[np.argsort(-values, kind="stable")]


def _floor(values: np.ndarray, size: int) -> float:
    """A score that about `2 * size` of `values` clear, from a sample of one position in each run of `step`.

    The sample's position in each run shifts (a Weyl sequence): every `step`-th position alone misses every
    note of a kind that repeats with a period sharing a factor with `step` (notes made in turn from templates),
    and the floor then falls below all of them: every position clears it, and the partition
    runs over every note again."""
    step = len(values) // (_SAMPLED * size)
    strata = np.arange(len(values) // step)
    sample = values[strata * step + (strata * _GOLDEN % 1.0 * step).astype(np.int64)]
    k = min(len(sample), 2 * size // step + 1)
    return float(np.partition(sample, len(sample) - k)[len(sample) - k])


class Ranked:
    """The notes ranked for one call (descending score, ties in position order, without `skip`), read
    only as far as the picks need: the best `BLOCK` are sorted once (a partition, then a sort of
    them), and the rest only when a pick reads past them."""

    def __init__(self, scores: np.ndarray, skip: int | None):
        self.scores = scores
        self.skip = skip
        head = best_positions(scores, None, BLOCK)
        self.head = head[head != skip] if skip is not None else head
        self.whole = len(head) == len(scores)

    def pick(self, costs: np.ndarray, budget: int, taken: Sequence[int] = ()) -> tuple[list[int], int]:
        """Positions in ranking order (`taken` left out), each taken when its cost fits what is left of
        `budget`; and what is left. The same as scanning the whole ranking: past the sorted head, only
        positions that fit what is left are ranked, `BLOCK` at a time, and each block is scanned in
        order. A position passed over does not fit then and never will, as what is left only shrinks, so
        the block's positions leave the race. A negative cost (a note shorter than its index line) can
        make what is left grow: then the rest is ranked whole, as that no longer holds."""
        grows = len(costs) > 0 and int(costs.min()) < 0
        head = self.head
        if taken:
            head = head[~np.isin(head, np.asarray(taken, dtype=np.int64))]
        chosen, left = _greedy(head, costs, budget, grows)
        if self.whole:
            return chosen, left
        open_ = np.ones(len(self.scores), dtype=bool)
        open_[self.head] = False
        if self.skip is not None:
            open_[self.skip] = False
        open_[list(taken)] = False
        fits = np.flatnonzero(open_ if grows else open_ & (costs <= left))
        while len(fits):
            block = best_positions(self.scores, fits, len(fits) if grows else BLOCK)
            open_[block] = False
            more, left = _greedy(block, costs, left, grows)
            chosen += more
            # what still fits only narrows as `left` shrinks: the next pass filters this one's positions
            fits = fits[open_[fits]] if grows else fits[open_[fits] & (costs[fits] <= left)]
        return chosen, left


_SCANNED = 32  # `_greedy` scans this many positions or fewer in Python: there a step of numpy costs more


def _greedy(order: np.ndarray, costs: np.ndarray, left: int, grows: bool) -> tuple[list[int], int]:
    """The positions of `order` taken in turn, each when its cost fits what is left of `left`; and what is left.

    With no negative cost (`grows` False) the running sum of the costs finds at once the run of positions
    that all fit, and the one after it does not fit, now or later (what is left only shrinks): so the rest
    is narrowed to the costs that still fit, and so on, a few steps of numpy rather than a Python step a
    position; the last few positions are scanned."""
    chosen: list[int] = []
    order_costs = costs[order]
    while not grows and len(order) > _SCANNED:
        run = np.cumsum(order_costs)
        n = int(np.searchsorted(run, left, side="right"))  # the first n fit, the next does not
        if n:
            chosen += order[:n].tolist()
            left -= int(run[n - 1])
        rest = order_costs[n + 1:]
        fit = rest <= left
        order, order_costs = order[n + 1:][fit], rest[fit]
    for i, cost in zip(order.tolist(), order_costs.tolist(), strict=True):
        if cost <= left:
            chosen.append(i)
            left -= cost
    return chosen, left
