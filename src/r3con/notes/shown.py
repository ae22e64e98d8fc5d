"""What each call of a round or stage was shown of the notes (`Shown`), kept on disk as the calls are answered.

A later relevance round's read, or a population call with notes chosen per document, is shown a few hundred
notes in full or as index lines; in a large run the keys of those notes would be the largest part of what
the driver holds a document. So each `Shown` goes to an unnamed temporary file as its call is
answered, and the run folder's record (notes/shown-N.jsonl) and the reuse record read them back, one at a
time, in corpus order (`order`) or by document (`get`). The file goes with the log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping

from .choices import Shown
from .keyed import KeyedBytes


class ShownLog:
    """Per document key, what its call was shown: written as each is answered, read back by key or in order."""

    def __init__(self, places: Mapping[str, int] | None = None) -> None:
        # on disk from the first entry (a stage whose calls show every note writes none); `places`: the run's parts'
        self._lines = KeyedBytes(places)
        self._order: tuple[str, ...] = ()

    def add(self, shown: Shown) -> None:
        """`shown`, for its document (a later entry for the same document replaces it)."""
        self._lines.put(shown.doc, (json.dumps(shown.to_dict(), ensure_ascii=False) + "\n").encode())

    def order(self, keys: Iterable[str]) -> ShownLog:
        """Iterate in the order of `keys` (those with an entry): the stage's corpus order, once its calls are done."""
        self._order = tuple(k for k in keys if k in self._lines)
        return self

    def get(self, key: str) -> Shown | None:
        """What document `key`'s call was shown, or None when it has no entry."""
        line = self._line(key)
        return None if line is None else Shown.from_dict(json.loads(line))

    def lines(self) -> Iterator[str]:
        """The entries as JSON lines (each ending in a newline), in `order`: what notes/shown-N.jsonl holds."""
        for key in self._order:
            line = self._line(key)
            if line is not None:
                yield line

    def __iter__(self) -> Iterator[Shown]:
        for line in self.lines():
            yield Shown.from_dict(json.loads(line))

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, key: object) -> bool:
        return key in self._lines

    def close(self) -> None:
        self._lines.close()
        self._order = ()

    def _line(self, key: str) -> str | None:
        line = self._lines.get(key)
        return None if line is None else line.decode()
