"""Documents: loading them from paths, and splitting those too long for the model's window."""

from __future__ import annotations

import glob
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from ._readers import SUPPORTED_SUFFIXES, read_document
from .errors import InputError
from .tokens import estimate_tokens, longest_prefix_within


@dataclass(frozen=True)
class Document:
    """One document, or one part of a document that was split to fit the window.

    `number` is the document's stable 1-based number in the corpus; a split document keeps its
    number and its parts are numbered 1..`parts`; `offset` is where a part's text starts in the whole
    document's text (so evidence spans found in a part point into the document).
    """

    number: int
    title: str
    text: str
    source: str = ""
    part: int = 1
    parts: int = 1
    offset: int = 0

    @cached_property
    def tokens(self) -> int:
        """The estimated tokens of `text` (counted once: stages ask for every call)."""
        return estimate_tokens(self.text)

    @property
    def key(self) -> str:
        """'3' for a whole document, '3.2' for part 2 of document 3."""
        return str(self.number) if self.parts == 1 else f"{self.number}.{self.part}"

    @property
    def label(self) -> str:
        if self.parts == 1:
            return f"Document {self.number}"
        return f"Document {self.number}, part {self.part} of {self.parts}"


def collect_paths(specs: Sequence[str | Path]) -> list[Path]:
    """Expand files, folders (recursively) and globs into a sorted, de-duplicated list of files."""
    found: list[Path] = []
    for spec in specs:
        text = str(spec)
        path = Path(text).expanduser()
        if path.is_dir():
            found.extend(
                sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUPPORTED_SUFFIXES)
            )
        elif path.is_file():
            found.append(path)
        elif glob.has_magic(text):
            matches = sorted(Path(m) for m in glob.glob(text, recursive=True) if Path(m).is_file())
            if not matches:
                raise InputError(f"no file matches {text!r}; check the pattern or quote it for your shell")
            found.extend(matches)
        else:
            raise InputError(f"no such file or folder: {text}; pass existing files, folders or globs")
    seen: set[Path] = set()
    unique = []
    for p in found:
        r = p.resolve()
        if r not in seen:
            seen.add(r)
            unique.append(p)
    return unique


def load_documents(specs: Sequence[str | Path]) -> tuple[Document, ...]:
    """Read every supported file under `specs` into numbered documents (empty files are skipped)."""
    paths = collect_paths(specs)
    docs: list[Document] = []
    for path in paths:
        title, text = read_document(path)
        if text.strip():
            docs.append(Document(number=len(docs) + 1, title=title, text=text, source=str(path)))
    if not docs:
        kinds = " ".join(sorted(SUPPORTED_SUFFIXES))
        raise InputError(f"no readable document in {', '.join(map(str, specs))}; supported: {kinds}")
    return tuple(docs)


def documents_from_texts(items: Iterable[tuple[str, str]]) -> tuple[Document, ...]:
    """Number (title, text) pairs as a corpus, for library callers that hold texts in memory."""
    return tuple(
        Document(number=i, title=title, text=text, source=f"<memory:{i}>")
        for i, (title, text) in enumerate(items, start=1)
    )


_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")
_SPACE = re.compile(r"\s+")


def _cut_points(text: str, pattern: re.Pattern[str]) -> list[int]:
    return [m.end() for m in pattern.finditer(text)]


def split_text(text: str, max_tokens: int) -> list[str]:
    """Split `text` into pieces of at most `max_tokens` (estimated), joined back they equal `text`.

    Cuts fall at paragraph breaks where possible, then sentence ends, then white space, and only
    as a last resort inside a word.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be positive")
    if estimate_tokens(text) <= max_tokens:
        return [text]
    pieces: list[str] = []
    rest = text
    while rest and estimate_tokens(rest) > max_tokens:
        limit = longest_prefix_within(rest, max_tokens)
        cut = 0
        for pattern in (_PARAGRAPH, _SENTENCE, _SPACE):
            points = [p for p in _cut_points(rest[: limit + 1], pattern) if 0 < p <= limit]
            if points and points[-1] > limit // 4:
                cut = points[-1]
                break
        if cut == 0:
            cut = max(1, limit)
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        pieces.append(rest)
    return pieces


def split_documents(docs: Sequence[Document], max_tokens: int,
                    split: Callable[[str, int], list[str]] = split_text) -> tuple[Document, ...]:
    """Split every document longer than `max_tokens` into numbered parts (cut by `split`)."""
    out: list[Document] = []
    for doc in docs:
        pieces = split(doc.text, max_tokens)
        if len(pieces) == 1:
            out.append(doc)
            continue
        at = 0
        for i, piece in enumerate(pieces, start=1):
            found = doc.text.find(piece, at)  # consecutive pieces: found at `at` (a splitter may drop blank ones)
            start = found if found >= 0 else at
            out.append(replace(doc, text=piece, part=i, parts=len(pieces), offset=start))
            at = start + len(piece)
    return tuple(out)
