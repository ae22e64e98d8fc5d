"""Large JSON written and read a piece at a time: a run folder's files, the sandbox's data.

`json_pieces` writes a value as `json.dumps` does, the lists and objects it is told to split an item at a
time, so that 100,000 documents' entries are never one string in memory.

A 100,000-document run's manifest, reuse.json and notes are tens of megabytes of JSON each, parsed whole
hundreds of megabytes of Python objects, while a reader such as the report keeps a few thousand entries
of them. `read_pruned` parses the file from disk a MiB at a time (Python's own decoder for each value),
goes into the lists and objects that `rules` name, item by item, and keeps an item only when the rule's
function says so; everything else is parsed whole, as `json.load` would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TextIO

Where = tuple[str | int, ...]  # an item's keys and list indexes from the top
Keep = Callable[[Where, Any], bool]  # (the item's path, its key or index in a list last; the item) -> keep it
Rule = tuple[tuple[str, ...], Keep]  # the path of a list or object from the top ("*": any key), and its Keep

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', flags=re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def nests_deeper(text: str, limit: int) -> bool:
    """Whether the JSON `text` nests lists and objects more than `limit` deep, told from its brackets outside
    strings, without parsing it. Python's parser goes a level deeper on the C stack for each: thousands deep, it
    raises RecursionError, and a finalizer the garbage collector runs down there fails too (and says so on
    stderr, as "Exception ignored in")."""
    if text.count("[") + text.count("{") <= limit:
        return False
    level = 0
    for bracket in _BRACKET.finditer(_STRING.sub("", text)):
        level += 1 if bracket.group() in "[{" else -1
        if level > limit:
            return True
    return False


_DECODER = json.JSONDecoder()
_SPACE = frozenset(" \t\n\r")
_CHUNK = 1 << 20


def _same(value: Any) -> Any:
    return value


def listlike(value: Any) -> bool:
    """Whether `value` is written as a JSON list an item at a time: a list, or a sequence that is neither text
    nor a tuple (`artifacts.rows.SpooledRows`: records read from disk as they are written)."""
    return isinstance(value, list) or (isinstance(value, Sequence)
                                       and not isinstance(value, str | bytes | bytearray | tuple))


class Each(Mapping[str, Any]):
    """`items`' values each made by `make` when read, never all at once: a long object of a JSON file written a
    piece at a time (`json_pieces`), such as a large run's evidence counts per document."""

    def __init__(self, items: Mapping[str, Any], make: Callable[[Any], Any]):
        self._items, self._make = items, make

    def __getitem__(self, key: str) -> Any:
        return self._make(self._items[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def json_pieces(value: Any, split: Callable[[Any, bool], bool], *, default: Callable[[Any], Any] | None = None,
                made: Callable[[Any], Any] = _same, each: Callable[[Any], Any] = _same,
                top: bool = True) -> Iterator[str]:
    """`json.dumps(value, ensure_ascii=False, default=default)` a piece at a time, the same text: an iterator
    (a list's items, made as written) and the lists and mappings `split(value, top)` picks an item at a
    time, a list's items each encoded whole, a mapping's values split again where `split` says.

    `made(value)` is what is written for `value` (a value made only as it is written); `each(item)`, what is
    written for an item of a split list (a record without its hidden fields, one copy at a time)."""
    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, default=default)

    value = made(value)
    if isinstance(value, Iterator) or listlike(value) and value and split(value, top):
        yield "["
        for i, item in enumerate(value):
            yield ("" if i == 0 else ", ") + dumps(each(item))
        yield "]"
    elif listlike(value) and not isinstance(value, list):  # not split: as json.dumps writes a list of it
        yield dumps(list(value))
    elif (isinstance(value, Mapping) and value and split(value, top)
          and all(isinstance(key, str) for key in value)):  # others: json.dumps's way
        yield "{"
        for n, (key, inner) in enumerate(value.items()):
            yield ("" if n == 0 else ", ") + dumps(key) + ": "
            yield from json_pieces(inner, split, default=default, made=made, each=each, top=False)
        yield "}"
    else:
        yield dumps(value)


def read_pruned(file: TextIO, rules: Sequence[Rule]) -> Any:
    """The JSON value in `file`, with the items of each list or object a rule names kept only where its
    function says (the first rule whose path matches applies); ValueError where it is not JSON."""
    reader = _Reader(file)
    value = _parse(reader, (), rules)
    if reader.peek():
        raise ValueError(f"extra data after the JSON value: {reader.peek()!r}")
    return value


def _matches(path: Where, pattern: tuple[str, ...]) -> bool:
    return len(path) == len(pattern) and all(p == "*" or p == k for k, p in zip(path, pattern, strict=True))


def _parse(reader: _Reader, path: Where, rules: Sequence[Rule]) -> Any:
    if not any(len(pattern) >= len(path) and _matches(path, pattern[:len(path)]) for pattern, _ in rules):
        return reader.value()  # nothing to prune below: parsed whole
    keep = next((k for pattern, k in rules if _matches(path, pattern)), None)
    opening = reader.peek()
    if opening not in ("{", "["):
        return reader.value()
    reader.take(opening)
    closing = "}" if opening == "{" else "]"
    out: Any = {} if opening == "{" else []
    if reader.peek() == closing:
        reader.take(closing)
        return out
    index = 0
    while True:
        key: str | int = index
        if opening == "{":
            key = reader.value()
            if not isinstance(key, str):
                raise ValueError(f"an object's key is not a string: {key!r}")
            reader.take(":")
        where = (*path, key)
        item = _parse(reader, where, rules)
        if keep is None or keep(where, item):
            item = _shared(item, reader.keys)
            if opening == "{":
                out[reader.keys.setdefault(key, key) if isinstance(key, str) else key] = item
            else:
                out.append(item)
        index += 1
        if reader.peek() == ",":
            reader.take(",")
            continue
        reader.take(closing)
        return out


def _shared(value: Any, keys: dict[str, str]) -> Any:
    """`value` with its objects' keys taken from `keys`: `json.load` shares one string per key across a file,
    a value parsed on its own does not, and a large run's report repeats the same keys in every record."""
    if isinstance(value, dict):
        return {keys.setdefault(k, k): _shared(v, keys) for k, v in value.items()}
    if isinstance(value, list):
        return [_shared(v, keys) for v in value]
    return value


class _Reader:
    """The file's text from where it has been read to, a chunk at a time."""

    def __init__(self, file: TextIO):
        self.file = file
        self.text = ""
        self.at = 0
        self.ended = False
        self.keys: dict[str, str] = {}  # the objects' keys kept, one string each (`_shared`)

    def _more(self, at_least: int = 0) -> bool:
        """Read on (at least `at_least` characters, so a long value is retried on twice as much); False at the end."""
        if self.ended:
            return False
        more = self.file.read(max(_CHUNK, at_least))
        if not more:
            self.ended = True
            return False
        self.text = self.text[self.at:] + more
        self.at = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space ("" at the end), not taken."""
        while True:
            text, at = self.text, self.at
            while at < len(text) and text[at] in _SPACE:
                at += 1
            self.at = at
            if at < len(text):
                return text[at]
            if not self._more():
                return ""

    def take(self, char: str) -> None:
        found = self.peek()
        if found != char:
            raise ValueError(f"expected {char!r}, found {found or 'the end'!r}")
        self.at += 1

    def value(self) -> Any:
        """The next whole JSON value."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.at)
            except json.JSONDecodeError:
                if self._more(len(self.text) - self.at):  # the value goes on past what was read
                    continue
                raise
            if end == len(self.text) and self._more():  # a number may go on past what was read
                continue
            self.at = end
            return value
