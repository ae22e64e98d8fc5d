"""The order of a selection of notes that lets calls for nearby documents share a prefix of them.

`prefix_order` (in `ranking`) orders every note but a call's own so that two calls' orders agree up to
the level where their documents' halves of the corpus part. A call whose notes budget lets it show only
some notes in full (and the rest as index lines) shows them in that same order (`in_prefix_order`): which
notes it shows stays the ranking's choice; only where each goes in its prompt changes, so that a call
shares with the one before it every note both show up to the first note only one of them shows.
"""

from __future__ import annotations

from collections.abc import Iterable


def parts_at(count: int, own: int, position: int) -> int:
    """How many halvings of 0..count-1 keep `position` with `own` (its block's rank in `prefix_order`)."""
    lo, hi, depth = 0, count, 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if (own < mid) != (position < mid):
            return depth
        lo, hi = (lo, mid) if own < mid else (mid, hi)
        depth += 1
    return depth


def in_prefix_order(positions: Iterable[int], count: int, own: int | None) -> list[int]:
    """`positions` (none of them `own`) in the order `prefix_order(count, own)` gives them; corpus order
    when `own` is None (a call for a document without a note of its own)."""
    if own is None:
        return sorted(positions)
    return sorted(positions, key=lambda p: (parts_at(count, own, p), p))
