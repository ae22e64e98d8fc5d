"""Documents: loading them from paths, and splitting those too long for the model's window."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, overload

from ..errors import EncryptedDocument, InputError
from ..tokens import estimate_tokens, longest_prefix_within, max_piece_chars
from .inputs import DuplicateInput, Inputs, ReadInputs, SkippedInput, UnreadableInput
from .names import shown, special_kind
from .readers import READABLE, SUPPORTED_SUFFIXES, NotText, read_document
from .spool import SpooledText, TextSpool
from .walk import WalkRules, walk_paths

if TYPE_CHECKING:
    from .readers import FileText


class FileReader(Protocol):
    """Reads a corpus's files for one load (`store.StoredReader`): `preload`, `read` each, `finish`."""

    def preload(self, roots: Sequence[str | Path]) -> None: ...

    def read(self, path: Path, real: str | None = None) -> tuple[FileText, str]: ...

    def finish(self, roots: Sequence[str | Path] = ()) -> FilesSeen: ...


class ReadsFiles(Protocol):
    """What `load_corpus` reads through: the corpus store (`store.CorpusStore`)."""

    def reader(self, pdf_password: str | None = None) -> FileReader: ...


@dataclass(frozen=True)
class FilesSeen:
    """What loading a corpus took from the store and what it had to read again, in files.

    `unchanged`: stat matched, neither read nor hashed; `touched`: stat changed, bytes the same
    (hashed, not extracted); `renamed`: a path the store did not know holding bytes it did (renamed or
    copied; not extracted); `read`: new or changed content, read and extracted; `deleted`: paths the
    store knew under the folders walked that are gone (they drop out, their content stays keyed).
    """

    unchanged: int = 0
    touched: int = 0
    renamed: int = 0
    read: int = 0
    deleted: int = 0

    @property
    def reused(self) -> int:
        return self.unchanged + self.touched + self.renamed

    def to_dict(self) -> dict[str, int]:
        return {"unchanged": self.unchanged, "touched": self.touched, "renamed": self.renamed,
                "read": self.read, "reused": self.reused, "deleted": self.deleted}




@dataclass(frozen=True, slots=True)
class Document:
    """One document, or one part of a document that was split to fit the window.

    `number` is the document's identity in the corpus: a file's is derived from its name
    (`document_numbers`), so it does not change when other files are added, removed or renamed, and
    every run over the corpus gives it the same (texts in memory: `documents_from_texts`); a split
    document keeps its number and its parts are numbered 1..`parts`; `offset` is where a part's text
    starts in the whole document's text (so evidence spans found in a part point into the document).
    `source` is the file's name as shown (escaped, see `_names.shown`); `path` is the name it was read
    by, which may hold bytes that are not UTF-8 (empty when it is `source`, or the document came from no
    file).

    Slots, not an attributes' dict: a document lives for the whole run, and a dict each is a large corpus's
    overhead for all of it.
    """

    number: int
    title: str
    text: str  # a SpooledText may stand for it (`spool`): see `_Text` below the class
    source: str = ""
    part: int = 1
    parts: int = 1
    offset: int = 0
    path: str = field(default="", compare=False, repr=False)
    _tokens: int | None = field(default=None, init=False, compare=False, repr=False)
    _sha256: bytes | None = field(default=None, init=False, compare=False, repr=False)  # the digest: 48 B less than its hex

    @property
    def tokens(self) -> int:
        """The estimated tokens of `text` (counted once: stages ask for every call)."""
        if self._tokens is None:
            object.__setattr__(self, "_tokens", estimate_tokens(self.text))
        return cast(int, self._tokens)

    @property
    def sha256(self) -> str:
        """The SHA-256 of `text` as UTF-8 (`text_sha256`), in hex: made from `digest` each time it is asked for."""
        return self.digest.hex()

    @property
    def digest(self) -> bytes:
        """The SHA-256 of `text` as UTF-8: computed once, or given by the loader, which has it from the corpus
        store or from telling duplicate files apart."""
        if self._sha256 is None:
            object.__setattr__(self, "_sha256", text_digest(self.text))
        return cast(bytes, self._sha256)

    @property
    def key(self) -> str:
        """'3' for a whole document, '3.2' for part 2 of document 3: one string a document part, interned, so
        the many mappings keyed by it (notes, decisions, calls answered) share it; not cached on the document
        (a slot every document would carry for the whole run)."""
        return sys.intern(str(self.number) if self.parts == 1 else f"{self.number}.{self.part}")

    @property
    def chars(self) -> int:
        """The length of `text` in characters (a spooled text's without reading it back)."""
        held = _TEXT.held(self)
        return held.chars if isinstance(held, SpooledText) else len(held)

    @property
    def spooled(self) -> bool:
        """Whether the text is on disk (`spool`), read back each time it is asked for."""
        return isinstance(_TEXT.held(self), SpooledText)

    @property
    def label(self) -> str:
        if self.parts == 1:
            return f"Document {self.number}"
        return f"Document {self.number}, part {self.part} of {self.parts}"


class _Text:
    """`Document.text`: the text itself, or where `spool.spool` wrote it (read back on every access, the same
    text). It stands in front of the slot @dataclass made for the field, which holds either: `__init__`,
    `replace` and unpickling set it through `__set__`."""

    def __init__(self, slot: Any):
        self._slot = slot

    @overload
    def __get__(self, doc: None, owner: type | None = None) -> _Text: ...
    @overload
    def __get__(self, doc: Document, owner: type | None = None) -> str: ...
    def __get__(self, doc: Document | None, owner: type | None = None) -> str | _Text:
        if doc is None:
            return self
        held = self._slot.__get__(doc, owner)
        return held.read() if isinstance(held, SpooledText) else held  # type: ignore[no-any-return]

    def __set__(self, doc: Document, text: str | SpooledText) -> None:
        self._slot.__set__(doc, text)

    def held(self, doc: Document) -> str | SpooledText:
        """What `doc` holds for its text: the text, or where it is on disk."""
        return self._slot.__get__(doc, Document)  # type: ignore[no-any-return]


_TEXT = _Text(Document.__dict__["text"])
setattr(Document, "text", _TEXT)  # noqa: B010 (after @dataclass made the slot it stands in front of)


@dataclass(frozen=True)
class Corpus:
    """The documents read from paths, and the account of every file they named (`inputs`)."""

    documents: tuple[Document, ...]
    inputs: Inputs
    stored: FilesSeen | None = None  # with a corpus store: which files it had to read again


def with_tokens(doc: Document, tokens: int) -> Document:
    """`doc` with its token count already known (kept by the corpus store), so it is not counted again."""
    object.__setattr__(doc, "_tokens", tokens)  # what `Document.tokens` would store on first use
    return doc


def load_corpus(specs: Sequence[str | Path], *, exclude: Sequence[str] = (), include_hidden: bool = False,
                pdf_password: str | None = None, store: ReadsFiles | None = None,
                numbers: Mapping[str, int] | None = None) -> Corpus:
    """Read every file under `specs` into numbered documents, accounting for each file that was not read.

    Folder walks leave out run folders, hidden files, version control, virtualenvs and dependency
    folders, and what an `exclude` glob names. Unsupported, empty and binary files and PDFs without a
    text layer are skipped; files that cannot be read are unreadable; a file whose text equals an
    earlier one's is read once. InputError when no document is left. With a `store`, a file whose
    content the store has seen is not read again (see `store`), and paths under the folders named that
    are gone are forgotten. `numbers`: the number an earlier attempt gave each source (a resumed run's
    manifest), kept, so that its requests are the attempt's whatever the sources are named by now (a folder
    named then, its files one by one now).
    """
    walk = walk_paths(specs, WalkRules(exclude=tuple(exclude), include_hidden=include_hidden))
    load = _Load(reader=store.reader(pdf_password) if store is not None else None, pdf_password=pdf_password,
                 unreadable=list(walk.unreadable))
    if load.reader is not None:
        load.reader.preload(specs)
    # each file's walk entry is let go as the file is read, so what the file keeps is made where its entry
    # was rather than among entries held to the end (docs/scale.md: the load's memory)
    found = list(reversed(walk.found))  # taken from the end: in the walk's order
    excluded = walk.excluded
    del walk
    while found:
        load.take(*found.pop())
    del found
    docs = load.docs
    computed = _numbered(docs, _roots(specs), numbers)
    read = ReadInputs(computed, (d.source for d in docs), said=load.said)  # the numbers and sources they hold
    inputs = Inputs(read=read, skipped=tuple(load.skipped), unreadable=tuple(load.unreadable),
                    duplicates=tuple(load.duplicates), excluded=excluded)
    stored = load.reader.finish(specs) if load.reader is not None else None
    if not docs:
        raise InputError(_nothing_read(specs, inputs))
    return Corpus(documents=tuple(docs), inputs=inputs, stored=stored)


@dataclass
class _Load:
    """One `load_corpus` as it reads: the documents in the order read (numbered once every name is known),
    and every file not read, with why."""

    reader: FileReader | None
    pdf_password: str | None
    unreadable: list[UnreadableInput]
    docs: list[Document] = field(default_factory=list)
    said: dict[int, tuple[str | None, str | None]] = field(default_factory=dict)  # encoding, warning by place
    skipped: list[SkippedInput] = field(default_factory=list)
    duplicates: list[DuplicateInput] = field(default_factory=list)
    first_with: dict[bytes, str] = field(default_factory=dict)  # sha256 of a text -> the source read with it

    def take(self, path: Path, real: str | None, plain: bool) -> None:
        """Read the file at `path` into a document, or account for why it is not one."""
        source = shown(path)
        if not plain and (special := special_kind(path)):  # never opened: a pipe would hang the run, /dev/zero never end
            if special.kind in ("dangling link", "symlink loop"):  # meant as a document, but cannot be read
                self.unreadable.append(UnreadableInput(source, special.reason))
            else:
                self.skipped.append(SkippedInput(source, special.reason, special.kind))
            return
        suffix = path.suffix.lower()
        if suffix not in SUPPORTED_SUFFIXES:
            kind = f"unsupported {suffix or '(no extension)'}"
            self.skipped.append(SkippedInput(source, f"{kind} type: r3con reads {READABLE}", kind))
            return
        try:
            if self.reader is not None:
                got, hexed = self.reader.read(path, real)  # the store keys a text by its hash in hex
                sha = bytes.fromhex(hexed)
            else:
                got = read_document(path, pdf_password=self.pdf_password)
                sha = text_digest(got.text)
        except NotText as exc:
            self.skipped.append(SkippedInput(source, exc.reason, exc.kind))
            return
        except EncryptedDocument:
            raise  # the user can fix it with a password: refuse the run rather than read around it
        except InputError as exc:
            self.unreadable.append(UnreadableInput(source, str(exc)))
            return
        if not got.text.strip():
            self.skipped.append(SkippedInput(source, "empty: no text in it", "empty"))
        elif sha in self.first_with:
            self.duplicates.append(DuplicateInput(source, same_as=self.first_with[sha]))
        else:
            doc = Document(number=0, title=shown(got.title), text=got.text, source=source,
                           path="" if source == str(path) else str(path))
            self.docs.append(doc)
            if got.encoding or got.warning:
                self.said[len(self.docs) - 1] = (got.encoding, got.warning)
            self.first_with[sha] = source
            object.__setattr__(doc, "_sha256", sha)  # what `Document.sha256` would store on first use


def _numbered(docs: Sequence[Document], roots: Sequence[str], numbers: Mapping[str, int] | None) -> list[int]:
    """Number `docs` in place (from their names, or the `numbers` an earlier attempt gave their sources)."""
    # the names are made here, once every file is read, not as each is: made among what the documents keep
    # and dropped once numbered, they would leave holes in memory that nothing of their size fills
    names = [_name(d.path or d.source, roots) for d in docs]
    computed = document_numbers(names, [d.digest for d in docs])  # the digests already held, not hex made anew
    del names
    if numbers:
        computed = [numbers.get(doc.source, n) for n, doc in zip(computed, docs, strict=True)]
    for number, doc in zip(computed, docs, strict=True):
        object.__setattr__(doc, "number", number)  # not copies: no one else has seen them yet
    return computed


NUMBER_DIGITS = 5  # a document's number has 5 digits, more only when the corpus has taken its 5-digit ones
_TRIES_PER_WIDTH = 2


def document_numbers(names: Sequence[str], ties: Sequence[str] | Sequence[bytes] = ()) -> list[int]:
    """Each document's number, from its name (a file's path below the folder named, else its file name; a
    text's title): the first of the name's candidates (hashes of it, 5 digits, then wider) that no name
    placed before it took, the names placed in the order of their hashes. A document keeps its number
    when others are added, removed or renamed, unless a new name's candidate is its number and the new
    name comes first (about one added document in 180 at 1,000 documents); equal names take successive
    candidates in the order of their `ties` (their texts' hashes), then of the corpus. A function of the
    names (and ties) alone: a fresh run and a reusing run agree."""
    tie = list(ties) or [""] * len(names)
    order = sorted(range(len(names)), key=lambda i: (_name_hash(names[i], -1), names[i], tie[i], i))
    taken: set[int] = set()
    out = [0] * len(names)
    for i in order:
        tries = 0
        while (number := _candidate(names[i], tries)) in taken:
            tries += 1
        taken.add(number)
        out[i] = number
    return out


def _candidate(name: str, tries: int) -> int:
    width = NUMBER_DIGITS + tries // _TRIES_PER_WIDTH
    low = 10 ** (width - 1)
    return low + _name_hash(name, tries) % (9 * low)


def _name_hash(name: str, salt: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{salt}\x00{name}".encode("utf-8", "surrogatepass")).digest()[:12], "big")


def _roots(specs: Sequence[str | Path]) -> list[str]:
    """The folders named, longest first: a file's name is its path below the one it was found under."""
    roots = [os.path.join(str(Path(str(s)).expanduser()), "") for s in specs if Path(str(s)).expanduser().is_dir()]
    return sorted(roots, key=len, reverse=True)


def _name(text: str, roots: Sequence[str]) -> str:
    """A file's name for its number (`text`: its path as read): its path below the folder named (the same wherever
    the folder is), else its file name (a file or a glob's match)."""
    for root in roots:
        if text.startswith(root):
            return shown(text[len(root):])
    return shown(os.path.basename(text))


def text_sha256(text: str) -> str:
    """The SHA-256 of `text` as UTF-8, in hex (`text_digest`)."""
    return text_digest(text).hex()


def text_digest(text: str, chunk: int = 1 << 20) -> bytes:
    """The SHA-256 of `text` as UTF-8, a megabyte of characters at a time: no copy of a large text, and
    Ctrl-C lands between the chunks."""
    digest = hashlib.sha256()
    for at in range(0, len(text), chunk):
        digest.update(text[at:at + chunk].encode("utf-8", "surrogatepass"))
    return digest.digest()


def spool(docs: Iterable[Document], into: TextSpool) -> None:
    """Each of `docs` keeps its text in `into` from now on, not in memory (a document already spooled is left
    as it is). What is computed of a text throughout a run (its tokens, its hash) is computed first."""
    for doc in docs:
        if doc.spooled:
            continue
        text = doc.text
        doc.tokens, doc.sha256  # noqa: B018 (counted once: kept on the document, asked for by every stage)
        object.__setattr__(doc, "text", into.put(text))  # Document is frozen: its text's holder changes, not its text


def load_documents(specs: Sequence[str | Path], *, pdf_password: str | None = None) -> tuple[Document, ...]:
    """Read every supported file under `specs` into numbered documents (see `load_corpus` for what is left out)."""
    return load_corpus(specs, pdf_password=pdf_password).documents


def _nothing_read(specs: Sequence[str | Path], inputs: Inputs) -> str:
    where = ", ".join(map(str, specs))
    why = [f"{Path(source).name}: {reason}" for source, reason in inputs.issues[:3]]
    if len(inputs.issues) > 3:
        why.append(f"{len(inputs.issues) - 3} more")
    if inputs.excluded:
        why.append(f"{len(inputs.excluded)} excluded (hidden, version control, run folders...; see --include-hidden)")
    detail = f" ({'; '.join(why)})" if why else ""
    return f"no readable document in {where}{detail}; supported: {READABLE}"


def documents_from_texts(items: Iterable[tuple[str, str]], *, stable: bool = False) -> tuple[Document, ...]:
    """Number (title, text) pairs as a corpus, for library callers that hold texts in memory: 1, 2, ... in
    order; with `stable`, each by its title (`document_numbers`; texts of one title by their hashes), as
    files are by their names, so that adding, removing or reordering texts leaves the others' numbers
    (what a later run of the question over the changed texts reuses, `docs/reuse.md`)."""
    pairs = list(items)
    numbers = (document_numbers([title for title, _ in pairs], [text_sha256(text) for _, text in pairs]) if stable
               else range(1, len(pairs) + 1))
    return tuple(Document(number=n, title=title, text=text, source=f"<memory:{i}>")
                 for i, (n, (title, text)) in enumerate(zip(numbers, pairs, strict=True), start=1))


_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")
_SPACE = re.compile(r"\s+")


BREAKS = (_PARAGRAPH, _SENTENCE, _SPACE)
EVEN = (0.25, 0.25, 0.25)  # a break anywhere past the first quarter: pieces of similar size


def cut_point(text: str, limit: int, floors: Sequence[float] = EVEN) -> int:
    """Where to cut `text` at or before `limit`: the last paragraph break past `floors[0] * limit`, else
    the last sentence end past `floors[1] * limit`, else the last white space past `floors[2] * limit`,
    else at `limit` (inside a word, the last resort)."""
    window = text[:limit + 1]
    for pattern, floor in zip(BREAKS, floors, strict=True):
        points = [m.end() for m in pattern.finditer(window) if 0 < m.end() <= limit]
        if points and points[-1] > limit * floor:
            return points[-1]
    return max(1, limit)


def split_text(text: str, max_tokens: int, floors: Sequence[float] = EVEN) -> list[str]:
    """Split `text` into pieces of at most `max_tokens` (estimated), joined back they equal `text`.

    Cuts fall at paragraph breaks where possible, then sentence ends, then white space, and only
    as a last resort inside a word (`cut_point`).
    """
    return list(iter_pieces(text, max_tokens, floors))


def iter_pieces(text: str, max_tokens: int, floors: Sequence[float] = EVEN) -> Iterator[str]:
    """The pieces of `split_text`, one at a time. Linear in the text: each cut looks only at the window one
    piece can fill, never at the rest of the text."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be positive")
    reach = max_piece_chars(max_tokens)
    at = 0
    while True:
        left = len(text) - at
        if left <= reach and estimate_tokens(text[at:]) <= max_tokens:  # a longer rest cannot fit
            if left or not at:
                yield text[at:]
            return
        window = text[at:at + reach + 1]
        cut = cut_point(window, longest_prefix_within(window, max_tokens), floors)
        yield window[:cut]
        at += cut


def split_documents(docs: Sequence[Document], max_tokens: int,
                    split: Callable[[str, int], list[str]] = split_text) -> tuple[Document, ...]:
    """Split every document longer than `max_tokens` into numbered parts (cut by `split`)."""
    out: list[Document] = []
    for doc in docs:
        out += _parts(doc, split(doc.text, max_tokens))
    return tuple(out)


async def split_documents_async(docs: Sequence[Document], max_tokens: int) -> tuple[Document, ...]:
    """`split_documents` that lets the event loop run every few hundredths of a second, so that Ctrl-C
    (which cancels the run's task) ends even the split of a very large document at once."""
    out: list[Document] = []
    paused = time.monotonic()
    for doc in docs:
        pieces = []
        for piece in iter_pieces(doc.text, max_tokens):
            pieces.append(piece)
            if time.monotonic() - paused > _YIELD_EVERY_S:
                await asyncio.sleep(0)
                paused = time.monotonic()
        out += _parts(doc, pieces)
    return tuple(out)


_YIELD_EVERY_S = 0.05


def _parts(doc: Document, pieces: Sequence[str]) -> list[Document]:
    if len(pieces) == 1:
        return [doc]
    out = []
    at = 0
    for i, piece in enumerate(pieces, start=1):
        # consecutive pieces start at `at` (a splitter may drop blank ones: then search)
        found = at if doc.text.startswith(piece, at) else doc.text.find(piece, at)
        start = found if found >= 0 else at
        out.append(replace(doc, text=piece, part=i, parts=len(pieces), offset=start))
        at = start + len(piece)
    return out
