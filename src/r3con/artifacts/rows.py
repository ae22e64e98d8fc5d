"""A table of records kept on disk: each record its JSON in a `TextSpool`, parsed again when it is read.

Population gives every document part its records, dicts and strings many times the size of their JSON, and
held, they would stay from a run's first answered call to its end and grow the driver with the corpus
(docs/scale.md). `SpooledRows` holds two numbers a record: where its JSON is. It is a `Sequence` of dicts like the
tuple it stands for: indexing and iterating parse each record again (a fresh dict each time, so what a
reader changes in one is not kept), `len` counts them, and it equals any sequence of the same records. It
pickles as a tuple of them.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from ..corpus.spool import TextSpool

__all__ = ["SpooledRows"]


class SpooledRows(Sequence[dict[str, Any]]):
    """Records (JSON objects) in the order they were added, each written to `spool` as it is added (`append`)
    or taken where another table of the same spool wrote it (`adopt`)."""

    __slots__ = ("_spool", "_at", "_size")

    def __init__(self, spool: TextSpool, records: Iterable[Mapping[str, Any]] = ()):
        self._spool = spool
        self._at = array("q")
        self._size = array("q")
        for record in records:
            self.append(record)

    @staticmethod
    def write(spool: TextSpool, record: Mapping[str, Any]) -> tuple[int, int]:
        """`record` written to `spool` as JSON (as `json.dumps` writes it, unescaped): where it is."""
        return spool.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))

    def append(self, record: Mapping[str, Any]) -> None:
        self.adopt(*self.write(self._spool, record))

    def adopt(self, at: int, size: int) -> None:
        """The record `write` put at `at` in this table's spool, added without writing it again."""
        self._at.append(at)
        self._size.append(size)

    def read(self, at: int, size: int) -> dict[str, Any]:
        record: dict[str, Any] = json.loads(self._spool.read(at, size))
        return record

    def __len__(self) -> int:
        return len(self._at)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self.read(at, size) for at, size in zip(self._at[index], self._size[index], strict=True)]
        return self.read(self._at[index], self._size[index])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for at, size in zip(self._at, self._size, strict=True):
            yield self.read(at, size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes | bytearray):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to a list of its records, which has none

    def __repr__(self) -> str:
        return f"SpooledRows({len(self):,} records)"

    def __reduce__(self) -> tuple[type[tuple[Any, ...]], tuple[tuple[dict[str, Any], ...]]]:
        return tuple, (tuple(self),)  # pickled (to another process, a copy) as the records themselves
