"""Token counts: the endpoint's `/tokenize` (vLLM), a local tokenizer file, or a documented estimate.

The estimate needs no tokenizer: Latin-script text averages about 4 characters per token in the BPE
vocabularies of current models (Qwen, Llama, GPT); CJK characters are roughly one token each. It adds
10% so that a document estimated to fit does fit. `TokenCounter` is the seam the estimate command and
the budget checks use; `llm.transport.tokenize.make_counter` picks the most exact one available.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from .errors import ConfigError

CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
"""Kana, CJK ideographs, Hangul and full-width forms: about one token each, and words of their own in search."""
CJK_CHAR = re.compile(f"[{CJK_RANGES}]")  # one CJK character
_IS_CJK = np.zeros(1 << 16, dtype=bool)  # by UTF-16 code unit: every range above is within the BMP
for _at in range(0, len(CJK_RANGES), 3):  # CJK_RANGES is "lo-hi" triples
    _IS_CJK[ord(CJK_RANGES[_at]):ord(CJK_RANGES[_at + 2]) + 1] = True
_FIRST_CJK = ord(CJK_RANGES[0])
MARGIN = 1.10
ESTIMATE_RULE = "about 4 characters per token (1 per CJK character), plus a 10% margin"


def estimate_tokens(text: str) -> int:
    """Estimated token count of `text` (CJK-aware, rounded up, with a 10% margin).

    ASCII text needs no scan for CJK characters (`str.isascii` is a flag check), so counting the
    same documents and notes for every call of a stage costs next to nothing.
    """
    if not text:
        return 0
    cjk = count_cjk(text)
    other = len(text) - cjk
    return int((cjk + other / 4.0) * MARGIN) + 1


def count_cjk(text: str) -> int:
    """The CJK characters in `text` (those `CJK_CHAR` matches), counted over its UTF-16 code units with a
    lookup table: a tenth of the time a regex scan takes, and every call's prompt is counted."""
    if text.isascii():
        return 0
    units = np.frombuffer(text.encode("utf-16-le", "surrogatepass"), dtype=np.uint16)
    units = units[units >= _FIRST_CJK]  # astral characters become surrogates, none of them CJK here
    return int(np.count_nonzero(_IS_CJK[units]))


def may_hold_cjk(text: str, chunk: int = 1 << 20) -> bool:
    """False when no character of `text` is above U+00FF (so none is CJK), checked without a regex scan:
    `str.isascii` is a flag check and encoding Latin-1 text to Latin-1 a copy, both far faster than a scan."""
    if text.isascii():
        return False
    try:
        for at in range(0, len(text), chunk):
            text[at:at + chunk].encode("latin-1")
    except UnicodeEncodeError:
        return True
    return False


_MIN_TOKENS_PER_CHAR = MARGIN / 4.0  # the estimate's floor, for Latin script (CJK is MARGIN)


def max_piece_chars(max_tokens: int) -> int:
    """A bound on the characters a text of at most `max_tokens` (estimated) can have: any longer text is over."""
    return int(max_tokens / _MIN_TOKENS_PER_CHAR) + 1


def longest_prefix_within(text: str, max_tokens: int) -> int:
    """Largest n with estimate_tokens(text[:n]) <= max_tokens (binary search on a window that can hold it).

    The window is scanned for CJK characters once; each step of the search counts them by bisection
    (scanning the prefix again at every step made splitting a large file slow)."""
    hi = min(len(text), max_piece_chars(max_tokens))
    window = text[:hi]
    cjk = [m.start() for m in CJK_CHAR.finditer(window)] if may_hold_cjk(window) else []

    def estimate(n: int) -> int:  # estimate_tokens(text[:n]), the same arithmetic
        if not n:
            return 0
        c = bisect.bisect_left(cjk, n)
        return int((c + (n - c) / 4.0) * MARGIN) + 1

    if estimate(hi) <= max_tokens:
        return hi
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate(mid) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo


class TokenCounter(Protocol):
    """Counts tokens of many texts at once; `source` says how (for manifests and the estimate's assumptions)."""

    source: str

    async def count(self, texts: Sequence[str]) -> list[int]: ...


class EstimateCounter:
    """The character-based estimate: no network, no tokenizer file."""

    source = f"estimate ({ESTIMATE_RULE})"

    async def count(self, texts: Sequence[str]) -> list[int]:
        return [estimate_tokens(t) for t in texts]


class FileCounter:
    """A Hugging Face `tokenizer.json`, read with the optional `tokenizers` package."""

    def __init__(self, path: Path):
        try:
            from tokenizers import Tokenizer  # type: ignore[import-not-found]
        except ImportError as exc:
            raise ConfigError(
                f"reading {path} needs the 'tokenizers' package: pip install tokenizers, or drop --tokenizer"
            ) from exc
        try:
            self._tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the library raises its own exception type for unreadable files
            raise ConfigError(f"cannot read tokenizer file {path}: {exc}; pass a Hugging Face tokenizer.json") from exc
        self.source = f"tokenizer file {path}"

    async def count(self, texts: Sequence[str]) -> list[int]:
        encoded = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encoded]
