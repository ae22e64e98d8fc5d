"""What the graph baselines (hipporag, linearrag) share: Personalized PageRank (igraph) and text vectors.

Vectors come from the embeddings endpoint when `--embedding-model` is set, else from a local hashed
TF-IDF of words and CJK character bigrams (no model needed; lexical, so weaker at synonyms). Either way
rows are L2-normalised, so a dot product is a cosine similarity.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ..errors import ConfigError
from ..notes.retrieval import tokenize, unit_rows
from ..tokens import CJK_CHAR
from ._common import MethodRun

LEXICAL_DIMS = 1024


def personalized_pagerank(nodes: int, edges: Sequence[tuple[int, int]], weights: Sequence[float],
                          reset: Sequence[float] | np.ndarray, damping: float) -> list[float]:
    """PageRank of each node on the undirected weighted graph, restarting at `reset` (uniform when all zero)."""
    try:
        import igraph
    except ImportError:
        raise ConfigError("hipporag and linearrag need igraph for PageRank: pip install 'r3con[graph]'") from None
    graph = igraph.Graph(n=nodes, edges=list(edges), directed=False)
    restart = np.clip(np.nan_to_num(np.asarray(reset, dtype=float)), 0, None)
    if not restart.sum():
        restart = np.ones(nodes)
    scores = graph.personalized_pagerank(vertices=None, directed=False, damping=damping,
                                         weights=list(weights) if edges else None, reset=restart.tolist(),
                                         implementation="prpack")
    return [float(s) for s in scores]


def _terms(text: str) -> list[str]:
    tokens = tokenize(text)
    cjk = [a + b for a, b in zip(tokens, tokens[1:], strict=False) if CJK_CHAR.fullmatch(a) and CJK_CHAR.fullmatch(b)]
    return tokens + cjk




def lexical_vectors(texts: Sequence[str], dims: int = LEXICAL_DIMS) -> np.ndarray:
    """Hashed TF-IDF vectors of `texts` (idf over these texts), L2-normalised rows."""
    counts = [Counter(_terms(t)) for t in texts]
    df: Counter[str] = Counter()
    for c in counts:
        df.update(c.keys())
    out = np.zeros((len(texts), dims), dtype=np.float32)
    for row, c in enumerate(counts):
        for term, n in c.items():
            idf = math.log(1 + len(texts) / df[term])
            out[row, zlib.crc32(term.encode()) % dims] += (1 + math.log(n)) * idf
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)  # unit rows kept in float32: Dracula has ~11k sentences


async def text_vectors(mr: MethodRun, stage: str, groups: Sequence[Sequence[str]]) -> tuple[list[np.ndarray], str]:
    """Vectors of each group of texts (one embeddings pass, or one lexical space for all); the kind used."""
    flat = [text for group in groups for text in group]
    async with mr.llm.embedder(mr.settings, stage) as emb:
        if emb is not None:
            matrix = unit_rows(await emb.embed(flat)) if flat else np.zeros((0, 1))
            kind = "dense"
        else:
            matrix, kind = lexical_vectors(flat), "lexical"
    out, start = [], 0
    for group in groups:
        out.append(matrix[start:start + len(group)])
        start += len(group)
    return out, kind


def min_max(values: np.ndarray) -> np.ndarray:
    """Scaled to [0, 1] (all ones when the values are equal)."""
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    return np.ones_like(values) if high == low else (values - low) / (high - low)


_SENTENCE = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")


def sentences(text: str) -> list[str]:
    """A passage's sentences (Latin and CJK ends, line breaks), as LinearRAG and A-RAG index them."""
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 3]
