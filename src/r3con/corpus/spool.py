"""A run's document texts on disk: written once, read back each time a call needs one.

A large corpus's texts are most of what a run would otherwise hold for its whole length, yet each is
needed only for moments: a call's prompt, its records' evidence. `documents.spool(docs, into)` writes each text to
one unlinked temporary file (in TMPDIR) and leaves the document a `SpooledText` in its place;
`Document.text` reads it back (one `pread`) whenever it is asked for, the same text. The file goes when
the last document that points into it does. A spooled document pickles with its text, as any other.
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
import weakref

from ..errors import ConfigError, DiskFull

_ENCODING = ("utf-8", "surrogatepass")  # a text with lone surrogates (a file name's bytes) survives the trip


class TextSpool:
    """One unlinked temporary file that texts are appended to (`put`, `append`) and read back from
    (`SpooledText`, `read`). `what` names what it holds, for the message a full disk gives."""

    def __init__(self, what: str = "the documents' texts") -> None:
        self._what = what
        try:
            self._file = tempfile.TemporaryFile(prefix="r3con-texts-")
        except OSError as exc:
            raise _unwritable(exc, what) from exc
        self._fd = self._file.fileno()
        weakref.finalize(self, self._file.close)  # closed (and so gone) when the last document's reference goes
        self._end = 0
        self._lock = threading.Lock()

    def put(self, text: str) -> SpooledText:
        at, size = self.append(text)
        return SpooledText(self, at, size, len(text))

    def append(self, text: str) -> tuple[int, int]:
        """`text` written at the end: where it begins and its size, to `read` it back by."""
        data = text.encode(*_ENCODING)
        with self._lock:
            at = self._end
            done = 0
            try:
                while done < len(data):
                    done += os.pwrite(self._fd, data[done:], at + done)
            except OSError as exc:
                raise _unwritable(exc, self._what) from exc
            self._end += len(data)
        return at, len(data)

    def read(self, at: int, size: int) -> str:
        data = os.pread(self._fd, size, at)
        if len(data) != size:  # the file is ours and unlinked: only a failing disk gives back less
            raise OSError(f"read {len(data)} of {size} bytes of {self._what} back from {self._file.name}")
        return data.decode(*_ENCODING)


_FIELD_BITS = 40  # a text's size in bytes and its length in characters each take this many bits of `_where`
_FIELD_MASK = (1 << _FIELD_BITS) - 1


class SpooledText:
    """Where a document's text is in a `TextSpool`, and its length in characters: one int for the three (one int
    object a document, not three: 64 B less a document)."""

    __slots__ = ("_spool", "_where")

    def __init__(self, spool: TextSpool, at: int, size: int, chars: int):
        if size > _FIELD_MASK:  # a text of a terabyte: said, not wrapped
            raise ValueError(f"{size:,} bytes of text: more than a spooled text holds")
        self._spool, self._where = spool, (at << _FIELD_BITS | size) << _FIELD_BITS | chars

    @property
    def chars(self) -> int:
        return self._where & _FIELD_MASK

    def read(self) -> str:
        where = self._where >> _FIELD_BITS
        return self._spool.read(where >> _FIELD_BITS, where & _FIELD_MASK)

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        return str, (self.read(),)  # pickled (to another process, a copy) as the text itself


def _unwritable(exc: OSError, what: str) -> DiskFull | ConfigError:
    where = tempfile.gettempdir()
    said = f"could not write {what} to a temporary file in {where}: {exc.strerror or exc}; "
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(said + "free space there or point TMPDIR at a disk with room")
    return ConfigError(said + "point TMPDIR at a folder r3con can write")
