"""A run's parts by place: one dict of each part's key to its place for the whole run (`Parts.places`), and the
numbers a run keeps per part in arrays beside it (`PerPart`), not in a dict of their own each.

A run keeps a number or two per document part through its stages: where each round's note is on disk, each
stage's reuse decision, the records each part gave, its evidence counts. As a dict each, 100,000 parts cost
3.7 MiB a dict and 28-32 B an int value (Python 3.11; bench_engine heap); as an array beside one shared dict
of places, 8 B a number.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .documents import Document

MISSING = -1  # a part without a number in a `PerPart`


class Parts(tuple["Document", ...]):
    """A run's document parts in order (a tuple), which know each part's place by its key (`places`): made once,
    when first asked for, and shared by what holds numbers per part."""

    @cached_property
    def places(self) -> Mapping[str, int]:
        return _places(self)


def places_of(parts: Sequence[Document]) -> Mapping[str, int]:
    """Each part's key -> its place in `parts`: the run's one dict for `Parts`, a new one otherwise."""
    return parts.places if isinstance(parts, Parts) else _places(parts)


def _places(parts: Sequence[Document]) -> dict[str, int]:
    places: dict[str, int] = {}
    for i, part in enumerate(parts):
        places.setdefault(part.key, i)  # a key that repeats keeps its first place
    return places


class PerPart(MutableMapping[str, int]):
    """A number (0 or more) per part key, held in an array at the part's place in `places`; a key not among them
    gets a place after them. Iterated in the parts' order, those with a number only."""

    def __init__(self, places: Mapping[str, int]):
        self._places = places
        self._extra: dict[str, int] = {}  # keys not among `places`: their places, after them
        self._values = array("q")
        self._count = 0

    def __setitem__(self, key: str, value: int) -> None:
        if value < 0:
            raise ValueError(f"{value} for {key!r}: a part's number is 0 or more")
        slot = self._places.get(key)
        if slot is None:
            slot = self._extra.setdefault(key, len(self._places) + len(self._extra))
        values = self._values
        if slot >= len(values):
            values.extend([MISSING] * (slot + 1 - len(values)))
        self._count += values[slot] == MISSING
        values[slot] = value

    def __delitem__(self, key: str) -> None:
        slot = self._slot(key)
        if slot is None or self._values[slot] == MISSING:
            raise KeyError(key)
        self._values[slot] = MISSING
        self._count -= 1

    def __getitem__(self, key: str) -> int:
        value = self._value(key)
        if value == MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._value(key) != MISSING

    def __iter__(self) -> Iterator[str]:
        values = self._values
        for places in (self._places, self._extra):
            for key, slot in places.items():
                if slot < len(values) and values[slot] != MISSING:
                    yield key

    def __len__(self) -> int:
        return self._count

    def _slot(self, key: str) -> int | None:
        slot = self._places.get(key)
        if slot is None:
            slot = self._extra.get(key)
        return slot if slot is not None and slot < len(self._values) else None

    def _value(self, key: str) -> int:
        slot = self._slot(key)
        return MISSING if slot is None else self._values[slot]
