"""Memory a stage freed, given back to the system before the next stage (glibc's `malloc_trim`).

A large run frees much of what a stage held when the stage ends: the texts once they are spooled, a round's
prompts and replies, the final notes' index after population. CPython hands objects over 512 bytes to the C
library's allocator, whose heap keeps freed memory in its holes: the driver's resident memory stays at what
it was, and grows with the corpus through stages that would fit in the holes of another size. `malloc_trim`
returns the free pages inside the heap, not only its top (docs/scale.md). Elsewhere (musl, macOS) there is
nothing to call and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

__all__ = ["give_back"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # no such library, or a C library without malloc_trim
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def give_back() -> bool:
    """The C heap's free pages back to the system; whether there was a `malloc_trim` to call (it takes
    milliseconds over hundreds of megabytes: called between stages, not per call)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
