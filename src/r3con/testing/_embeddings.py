"""Deterministic embeddings for the scripted server: hashed bag of words, L2-normalised.

Each lower-cased word (each CJK character) adds +1 or -1 to one of `DIMS` coordinates, both chosen by
a hash of the word, so texts that share words point the same way and no model is needed.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

DIMS = 256
_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[a-z0-9]+")


def vector(text: str, dims: int = DIMS) -> list[float]:
    """The text's hashed bag-of-words vector (all zeros for a text without words)."""
    out = [0.0] * dims
    for word in _TOKEN.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dims
        out[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in out))
    return [x / norm for x in out] if norm else out


def response(body: dict[str, Any], model: str) -> dict[str, Any]:
    """An OpenAI-shaped /v1/embeddings response for a request body (input: a string or a list of strings)."""
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else [str(x) for x in (raw or [])]
    tokens = sum(len(_TOKEN.findall(t.lower())) for t in texts)
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(texts)],
        "model": body.get("model") or model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
