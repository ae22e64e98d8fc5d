"""Byte strings by document key on an unnamed temporary file: what a stage keeps of each call until it is used;
and a round's notes on disk (`SpooledNotes`).

A stage of a large run makes something for every document that it needs again only once or twice (the
notes choice a call will be shown, what an answered call was shown), and holding it for the whole stage was
the largest part of what the driver held a document. `KeyedBytes` writes each to one
unnamed temporary file (in TMPDIR, opened with the first) and keeps one int a key: where it is and its size.
The file goes with the store.
"""

from __future__ import annotations

import tempfile
import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..corpus.places import PerPart
from ..corpus.spool import TextSpool

_SIZE_BITS = 32  # an entry's size in the low bits of its int, where it begins above them
_SIZE_MASK = (1 << _SIZE_BITS) - 1


class KeyedBytes:
    """`put(key, data)`, then `get` or `pop` it by key (a later `put` for a key replaces its entry). Where each
    entry is and its size, 8 B a key in an array at the key's place among the run's parts (`places`, when its
    keys are theirs: `corpus.places`), not an int a key in a dict of its own."""

    def __init__(self, places: Mapping[str, int] | None = None) -> None:
        self._file: Any = None
        self._places = places if places is not None else {}
        self._where = PerPart(self._places, "Q")

    def put(self, key: str, data: bytes) -> None:
        _pack(0, len(data))  # too large for an entry: said before anything is written
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile()
                self._closer = weakref.finalize(self, self._file.close)  # closed when the store goes, or at `close`
            at = self._file.seek(0, 2)
            self._file.write(data)
            self._file.flush()  # a full disk says so here, not when the entry is read back
        except OSError as exc:  # named, so that a full disk's message says where (an unnamed file has no name)
            raise OSError(exc.errno, exc.strerror, f"a temporary file in {tempfile.gettempdir()} (TMPDIR)") from exc
        self._where[key] = _pack(at, len(data))

    def get(self, key: str) -> bytes | None:
        """`key`'s entry, or None when it has none."""
        return self._read(self._where.get(key))

    def pop(self, key: str) -> bytes | None:
        """`key`'s entry, no longer kept; None when it has none (or it was taken already)."""
        return self._read(self._where.pop(key, None))

    def _read(self, where: int | None) -> bytes | None:
        if where is None or self._file is None:
            return None
        at, size = _unpack(where)
        self._file.seek(at)
        data: bytes = self._file.read(size)
        return data

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def close(self) -> None:
        """The file closed (and so gone) now, and the entries with it."""
        if self._file is not None:
            self._closer()
            self._file = None
        self._where = PerPart(self._places, "Q")


class SpooledNotes(Mapping[str, str]):
    """A round's notes (document key -> note) on disk: each read back when asked for. The driver holds 8 bytes a
    note in an array at its part's place among the run's parts (`places`, `corpus.places`): not a dict and an int
    a note each round. Held as text, every round's notes stayed for the whole run, the
    first round's too, which only the reuse record and the run folder read again. A round writes each note as
    its read returns (`add`), and puts the keys in corpus order at its end (`ordered`)."""

    def __init__(self, notes: Mapping[str, str] | None = None, *, places: Mapping[str, int] | None = None,
                 _spool: TextSpool | None = None, _where: PerPart | None = None):
        self._spool = _spool if _spool is not None else TextSpool("the notes")
        self._where = _where if _where is not None else PerPart(places if places is not None else {}, "Q")
        for key, text in (notes or {}).items():
            self.add(key, text)

    def add(self, key: str, text: str) -> None:
        """`text` as `key`'s note (a later one for a key replaces it)."""
        self._where[key] = _pack(*self._spool.append(text))

    def has_note(self, key: str) -> bool:
        """Whether `key` has a note that is not empty, without reading it back."""
        where = self._where.get(key)
        return where is not None and bool(where & _SIZE_MASK)

    def ordered(self, keys: Iterable[str]) -> SpooledNotes:
        """These notes (on the same file) with their keys in the order of `keys`, those without a note left out:
        these very notes where that is the order they are in already (a round's, with its parts' places, in corpus
        order), else a copy of their places in that order."""
        where = self._where
        order = [k for k in keys if k in where]
        if len(order) == len(where) and all(a == b for a, b in zip(where, order, strict=True)):
            return self
        placed = PerPart({}, "Q")
        for key in order:
            placed[key] = where[key]
        return SpooledNotes(_spool=self._spool, _where=placed)

    def __getitem__(self, key: str) -> str:
        return self._spool.read(*_unpack(self._where[key]))

    def __contains__(self, key: object) -> bool:
        return key in self._where  # not read back, as Mapping's would

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def __reduce__(self) -> tuple[type[dict[str, str]], tuple[dict[str, str]]]:
        return dict, (dict(self),)  # pickled (to another process, a copy) as the notes themselves


def _pack(at: int, size: int) -> int:
    """Where an entry begins and its size, as one int (`_SIZE_BITS` of size below where it begins)."""
    if size >> _SIZE_BITS:
        raise ValueError(f"{size:,} bytes for one key: more than an entry holds (4 GiB)")
    return at << _SIZE_BITS | size


def _unpack(where: int) -> tuple[int, int]:
    return where >> _SIZE_BITS, where & _SIZE_MASK
