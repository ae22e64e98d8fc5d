"""Shared by the hostile-input batteries: a time limit on a test, and files no ordinary folder holds."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path


class Hung(Exception):
    """The command did not end within its stated limit."""


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fail with Hung if the block takes longer than `seconds` (SIGALRM: it interrupts a blocked open() too)."""
    def expire(signum: int, frame: object) -> None:
        raise Hung(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def unix_socket(path: Path) -> Path:
    """A Unix socket file at `path` (bound from its folder: socket paths are limited to 108 bytes)."""
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(path.name)
    finally:
        os.chdir(here)
    return path


def weird_name(folder: Path, raw: bytes) -> Path:
    """The path in `folder` of a name given as raw bytes (not UTF-8, control characters...)."""
    return Path(os.fsdecode(os.fsencode(folder) + b"/" + raw))
