"""A run's parts by place: one dict of each part's key to its place for the whole run (`Parts.places`), and the
numbers a run keeps per part in arrays beside it (`PerPart`), not in a dict of their own each.

A run keeps a number or two per document part through its stages: where each round's note is on disk, each
stage's reuse decision, the records each part gave, its evidence counts. A dict each would repeat the keys'
table and make an int object a value; an array beside one shared dict of places holds the machine word alone
(docs/scale.md).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .documents import Document

_MISSING = {"q": -1, "Q": (1 << 64) - 1}  # what stands for no number in a `PerPart` of each typecode


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
    """A number per part key, held in an array at the part's place in `places`; a key not among them gets a place
    after them, in the order first set. Iterated in that order, those with a number only. `typecode` "q": numbers
    from 0 below 2^63; "Q": from 0 below 2^64 - 1."""

    def __init__(self, places: Mapping[str, int], typecode: str = "q"):
        self._places = places
        self._extra: dict[str, int] = {}  # keys not among `places`: their places, after them
        self._values = array(typecode)
        self._missing = _MISSING[typecode]
        self._count = 0

    @property
    def places(self) -> Mapping[str, int]:
        return self._places

    def __setitem__(self, key: str, value: int) -> None:
        if value < 0 or value >= self._missing > 0:
            raise ValueError(f"{value} for {key!r}: a part's number is 0 or more, below {max(self._missing, 2**63):,}")
        slot = self._places.get(key)
        if slot is None:
            slot = self._extra.setdefault(key, len(self._places) + len(self._extra))
        values = self._values
        if slot >= len(values):
            values.extend([self._missing] * (slot + 1 - len(values)))
        self._count += values[slot] == self._missing
        values[slot] = value

    def __delitem__(self, key: str) -> None:
        slot = self._slot(key)
        if slot is None or self._values[slot] == self._missing:
            raise KeyError(key)
        self._values[slot] = self._missing
        self._count -= 1

    def __getitem__(self, key: str) -> int:
        value = self._value(key)
        if value == self._missing:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._value(key) != self._missing

    def __iter__(self) -> Iterator[str]:
        values, missing = self._values, self._missing
        for places in (self._places, self._extra):
            for key, slot in places.items():
                if slot < len(values) and values[slot] != missing:
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
        return self._missing if slot is None else self._values[slot]
