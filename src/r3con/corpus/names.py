"""Paths as r3con shows them, and the files a walk must never open.

A file system allows names that are not UTF-8 (Python holds their bytes as lone surrogates); printed,
written to JSON or put in a report they would fail, so every name r3con shows goes through `shown`,
which writes such bytes as `\\xe9`. A folder can also hold what is no file to read: a named pipe (reading
waits for a writer forever), a socket, a device (a link to /dev/zero never ends), a link that loops or
leads nowhere. `special_kind` names them from `os.stat` alone, before anything is opened.
"""

from __future__ import annotations

import base64
import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path


def shown(path: str | Path) -> str:
    """`path` as text that prints and encodes anywhere, on one line: bytes that are not UTF-8, and control
    characters (a newline in a name would break a one-line message), written as \\xNN."""
    text = str(path)
    if text.isascii() and text.isprintable():  # the common name: for ASCII, printable is "no control character"
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = os.fsencode(text).decode("utf-8", "backslashreplace")
    if _CONTROL.search(text):
        text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def name_bytes(path: str) -> str | None:
    """The bytes of `path` (`os.fsencode`) in base64 when `shown` escapes it, so a manifest can find the file
    again exactly; None when the shown name is the name."""
    return None if shown(path) == path else base64.b64encode(os.fsencode(path)).decode("ascii")


def from_name_bytes(value: object) -> str | None:
    """The path `name_bytes` wrote, as Python names files (`os.fsdecode`); None when absent or not base64."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return os.fsdecode(base64.b64decode(value, validate=True))
    except ValueError:  # binascii.Error: a hand-edited manifest
        return None


@dataclass(frozen=True)
class Special:
    """A path that is no regular file or folder: `kind` groups it (named pipe, socket, device, symlink loop,
    dangling link); `what` it is; `why` it is not read."""

    kind: str
    what: str
    why: str

    @property
    def reason(self) -> str:
        """Why a walk skipped it, and what to do."""
        return f"{self.what}: {self.why}; remove it or --exclude it"

    def refusal(self, given: str) -> str:
        """Why a path given on the command line is refused, and what to do."""
        return f"{shown(given)} is {self.what}, not a document ({self.why}); pass regular files, folders or globs"


def special_kind(path: Path) -> Special | None:
    """What `path` is when it is no regular file or folder, or None. Nothing is opened."""
    link = os.path.islink(path)
    via = f" (a link to {shown(_target(path))})" if link else ""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Special("symlink loop", "a symbolic link that loops back on itself", "nothing to read")
        if link and exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return Special("dangling link", f"a link to {shown(_target(path))}, which does not exist", "nothing to read")
        return None  # the reader says what else is wrong (permissions...)
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return Special("named pipe", f"a named pipe (FIFO){via}", "not opened: reading one waits for a writer")
    if stat.S_ISSOCK(mode):
        return Special("socket", f"a socket{via}", "not opened: a socket holds no text")
    if stat.S_ISCHR(mode):
        return Special("device", f"a character device{via}", "not opened: a device such as /dev/zero never ends")
    if stat.S_ISBLK(mode):
        return Special("device", f"a block device{via}", "not opened: a disk is no document")
    return Special("special file", f"a special file{via}", "not opened: not a regular file")


def _target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"
