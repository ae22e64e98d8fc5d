"""Per stage and document part: reused or recomputed, and why (reuse.json), held beside the run's parts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...corpus.places import PerPart


@dataclass
class Decisions:
    """Per stage and document part: reused or recomputed, and why (reuse.json). Under its stage a part's decision
    is the number of its (reused, why) pair in `kinds` (a handful of pairs in all), held in an array at the
    part's place in the run's parts (`PerPart` over `places`); the notes that ranked first for a later-round
    read are kept apart, only where there are some. The entries are made as reuse.json is written: a dict or
    a tuple a stage and document would be held for the whole run for a file written once."""

    mode: str
    previous: str | None
    places: Mapping[str, int] = field(default_factory=dict)  # the run's parts' places (`Parts.places`)
    by_stage: dict[str, PerPart] = field(default_factory=dict)
    kinds: list[tuple[bool, str]] = field(default_factory=list)
    tops: dict[str, Tops] = field(default_factory=dict)
    _kind: dict[tuple[bool, str], int] = field(default_factory=dict, repr=False)

    def note(self, doc: str, stage: str, reused: bool, why: str, top: Sequence[str] = ()) -> None:
        """`doc`'s `stage` was reused or not, and `why`; `top`: the notes that ranked first for a later-round read."""
        kind = (reused, why)
        if kind not in self._kind:
            self._kind[kind] = len(self.kinds)
            self.kinds.append(kind)
        decided = self.by_stage.get(stage)
        if decided is None:
            decided = self.by_stage[stage] = PerPart(self.places)
        decided[doc] = self._kind[kind]
        tops = self.tops.get(stage)
        if top and tops is None:
            tops = self.tops[stage] = Tops(self.places)
        if tops is not None:
            tops[doc] = tuple(top)

    def of(self, stage: str, doc: str) -> tuple[bool, str, tuple[str, ...]] | None:
        """`doc`'s decision in `stage` (reused, why, top), or None when it has none there."""
        kind = self.by_stage[stage].get(doc) if stage in self.by_stage else None
        if kind is None:
            return None
        tops = self.tops.get(stage)
        return (*self.kinds[kind], tops.get(doc, ()) if tops is not None else ())

    def counts(self) -> dict[str, dict[str, int]]:
        """Per stage: how many document parts were reused and recomputed."""
        out: dict[str, dict[str, int]] = {}
        for stage, decided in self.by_stage.items():
            reused = sum(n for kind, n in Counter(decided.values()).items() if self.kinds[kind][0])
            out[stage] = {"reused": reused, "recomputed": len(decided) - reused}
        return out

    def whys(self) -> dict[str, dict[str, int]]:
        """Per stage: how many document parts for each reason."""
        out: dict[str, dict[str, int]] = {}
        for stage, decided in self.by_stage.items():
            whys: Counter[str] = Counter()
            for kind, count in Counter(decided.values()).items():
                whys[self.kinds[kind][1]] += count
            out[stage] = dict(whys.most_common())
        return out

    def recomputed(self) -> dict[str, dict[str, str]]:
        """Per document part, the stages it was recomputed in and why (the exceptions, when most is reused)."""
        out: dict[str, dict[str, str]] = {}
        for stage, decided in self.by_stage.items():
            for doc, kind in decided.items():
                reused, why = self.kinds[kind]
                if not reused:
                    out.setdefault(doc, {})[stage] = why
        return out

    def documents(self) -> Mapping[str, dict[str, dict[str, Any]]]:
        """Per document part and stage, {"reused", "why"} and, for a later-round read, "top": each document's
        made when it is read (reuse.json is written a document at a time)."""
        return _PerDocument(self)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "previous_run": self.previous, "counts": self.counts(), "why": self.whys(),
                "documents": self.documents()}


class Tops(Mapping[str, tuple[str, ...]]):
    """A stage's notes that ranked first for each later-round read (`TOP` at most), by the read's part: their
    places among the run's parts (`places`), each plus one in `BITS` bits of one number a part (`PerPart`); a
    tuple of their keys only for a read whose are not all among the parts, since a tuple a read and its dict
    entry would be held for the whole run."""

    BITS = 21  # a place plus one: parts up to 2 million (past that, the tuples)

    def __init__(self, places: Mapping[str, int]):
        self._places = places
        self._packed = PerPart(places)
        self._other: dict[str, tuple[str, ...]] = {}
        self._keys: list[str] | None = None  # the parts' keys by place, made when a top is first read back

    def __setitem__(self, doc: str, top: tuple[str, ...]) -> None:
        self._packed.pop(doc, None)
        self._other.pop(doc, None)
        if not top:
            return
        packed = self._pack(top)
        if packed is None:
            self._other[doc] = top
        else:
            self._packed[doc] = packed

    def __getitem__(self, doc: str) -> tuple[str, ...]:
        packed = self._packed.get(doc)
        if packed is None:
            return self._other[doc]
        if self._keys is None:
            self._keys = [""] * (max(self._places.values(), default=-1) + 1)
            for key, place in self._places.items():
                self._keys[place] = key
        mask, out = (1 << self.BITS) - 1, []
        while packed:
            out.append(self._keys[(packed & mask) - 1])
            packed >>= self.BITS
        return tuple(out)

    def __iter__(self) -> Iterator[str]:
        yield from self._packed
        yield from self._other

    def __len__(self) -> int:
        return len(self._packed) + len(self._other)

    def _pack(self, top: tuple[str, ...]) -> int | None:
        if len(top) * self.BITS > 63:
            return None
        packed = 0
        for i, key in enumerate(top):
            place = self._places.get(key)
            if place is None or place + 1 >= 1 << self.BITS:
                return None
            packed |= (place + 1) << (i * self.BITS)
        return packed


class _PerDocument(Mapping[str, dict[str, dict[str, Any]]]):
    """`Decisions.documents`: a document's stages; the documents of the first stage, then those new in each next
    one, each stage's in the parts' order."""

    def __init__(self, decisions: Decisions):
        self._decisions = decisions

    def __getitem__(self, doc: str) -> dict[str, dict[str, Any]]:
        out = {}
        for stage in self._decisions.by_stage:
            decided = self._decisions.of(stage, doc)
            if decided is not None:
                reused, why, top = decided
                out[stage] = {"reused": reused, "why": why, **({"top": list(top)} if top else {})}
        if not out:
            raise KeyError(doc)
        return out

    def __iter__(self) -> Iterator[str]:
        stages = list(self._decisions.by_stage.values())
        for i, decided in enumerate(stages):
            for doc in decided:
                if not any(doc in earlier for earlier in stages[:i]):
                    yield doc

    def __len__(self) -> int:
        return sum(1 for _ in self)
