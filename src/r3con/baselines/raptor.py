"""raptor: a tree of recursive summaries of the collection, built without the task, then retrieval.

After Sarthi et al. (2024, "RAPTOR: Recursive Abstractive Processing for Tree-Organized Retrieval"):
the documents are cut into small chunks (the leaves, 100 tokens in the paper); nodes are clustered
and each cluster is summarised into a parent node, level after level, until one node is left or
`max_levels` is reached. The task plays no part in building the tree. Retrieval is the paper's
"collapsed tree": every node of every level is ranked against the task and taken best first while
the retrieved text fits `budget_tokens` (2,000 in the paper); one call answers from it.

Clustering: with an embeddings model (`--embedding-model`) nodes are clustered by k-means on their
embeddings (the paper uses Gaussian mixtures over UMAP-reduced embeddings); without one, consecutive
nodes in reading order are grouped. Either way a cluster holds at most `cluster_size` nodes.
Ranking is BM25, fused with cosine similarity of embeddings when they are available.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Settings
from ..corpus.documents import Document
from ..llm.replies import final_answer_line
from ..llm.transport.embeddings import Embedder
from ..notes.retrieval import BM25, cosine_scores, ranking, reciprocal_rank_fusion, within_budget
from ..prompts.render import render
from ..results import MethodFn, MethodOutcome
from ..tokens import estimate_tokens
from ._common import budget_for, check_options, chunk_documents, head, method_run

NAME = "raptor"
DESCRIPTION = "RAPTOR: chunks clustered and summarised recursively into a tree (without the task), collapsed-tree retrieval"
SUMMARIZE = "raptor-summarize"
ANSWER = "raptor-answer"
EMBED_STAGE = "raptor-embed"


@dataclass(frozen=True)
class Options:
    """Parameters of the RAPTOR baseline.

    chunk_tokens: size of a leaf chunk.
    cluster_size: most nodes summarised together.
    max_levels: most summary levels above the leaves.
    summary_max_tokens: output budget of a summary.
    budget_tokens: most tokens of retrieved nodes in the answer prompt.
    kmeans_iterations: iterations of k-means (with embeddings only).
    answer_max_tokens: the answer's output budget.
    """

    chunk_tokens: int = 100
    cluster_size: int = 6
    max_levels: int = 5
    summary_max_tokens: int = 256
    budget_tokens: int = 2000
    kmeans_iterations: int = 10
    answer_max_tokens: int = 4096


@dataclass(frozen=True)
class Node:
    """A tree node: a leaf chunk (level 0) or a summary of its children's texts."""

    index: int
    level: int
    text: str
    source: str
    children: tuple[int, ...] = ()

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


def _source(docs: list[int]) -> str:
    lo, hi = min(docs), max(docs)
    return f"Document {lo}" if lo == hi else f"Documents {lo}-{hi}"


def clusters_in_order(count: int, size: int) -> list[list[int]]:
    """Consecutive groups of at most `size` positions."""
    return [list(range(i, min(count, i + size))) for i in range(0, count, size)]


def kmeans_clusters(vectors: list[list[float]], size: int, iterations: int) -> list[list[int]]:
    """k-means (k = ceil(n / size), spread initial centres) on unit vectors; clusters over `size` are split."""
    data = np.asarray(vectors, dtype=float)
    n = len(data)
    k = max(1, math.ceil(n / size))
    centres = data[np.linspace(0, n - 1, k).astype(int)].copy()
    labels = np.zeros(n, dtype=int)
    for _ in range(iterations):
        labels = np.argmax(data @ centres.T, axis=1)
        for c in range(k):
            members = data[labels == c]
            if len(members):
                mean = members.mean(axis=0)
                norm = np.linalg.norm(mean)
                centres[c] = mean / norm if norm else mean
    out: list[list[int]] = []
    for c in range(k):
        members = [int(i) for i in np.flatnonzero(labels == c)]
        out.extend(members[i:i + size] for i in range(0, len(members), size))
    return [c for c in out if c]


async def _embed(embedder: Embedder | None, texts: list[str]) -> list[list[float]] | None:
    return await embedder.embed(texts) if embedder is not None else None


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr, \
                mr.llm.embedder(settings, EMBED_STAGE) as embedder:
            chunks = chunk_documents(documents, options.chunk_tokens)
            nodes = [Node(index=c.index, level=0, text=c.text, source=f"Document {c.doc}") for c in chunks]
            docs_of: dict[int, list[int]] = {c.index: [c.doc] for c in chunks}
            vectors = await _embed(embedder, [n.text for n in nodes])
            level_nodes = list(nodes)
            levels = [len(nodes)]
            # a cluster's texts must fit one summarising prompt
            fit = budget_for(mr.window, options.summary_max_tokens)
            while len(level_nodes) > 1 and len(levels) <= options.max_levels:
                positions = (kmeans_clusters(vectors[-len(level_nodes):], options.cluster_size,
                                             options.kmeans_iterations)
                             if vectors is not None else clusters_in_order(len(level_nodes), options.cluster_size))
                groups = [[level_nodes[p] for p in sorted(c)] for c in positions]
                level = len(levels)

                async def summarise(group: list[Node], level: int = level) -> str:
                    share = max(32, fit // len(group))
                    view = [{"source": g.source, "text": head(g.text, share)} for g in group]
                    return await mr.ask(SUMMARIZE, render("raptor_summarize", nodes=view,
                                                          max_words=options.summary_max_tokens * 3 // 4),
                                        max_tokens=options.summary_max_tokens, round=level)

                made = await mr.each(SUMMARIZE, groups, summarise,
                                     lambda g: ",".join(str(n.index) for n in g))
                mr.check_failures(SUMMARIZE, len(groups))
                parents = []
                for group, text in zip(groups, made, strict=True):
                    if not text:
                        continue
                    docs = sorted({d for g in group for d in docs_of[g.index]})
                    node = Node(index=len(nodes), level=level, text=text, source=_source(docs),
                                children=tuple(g.index for g in group))
                    docs_of[node.index] = docs
                    nodes.append(node)
                    parents.append(node)
                if vectors is not None and parents:
                    more = await _embed(embedder, [p.text for p in parents])
                    vectors = [*vectors, *(more or [])]
                if not parents:
                    break
                levels.append(len(parents))
                if len(parents) >= len(level_nodes):
                    break  # summarising no longer shrinks the level
                level_nodes = parents

            texts = [n.text for n in nodes]
            rankings = [BM25(texts).top_k(task, len(texts))]
            if vectors is not None and embedder is not None and len(vectors) == len(nodes):
                query = (await embedder.embed([task]))[0]
                rankings.append(ranking(cosine_scores(query, vectors)))
            order = rankings[0] if len(rankings) == 1 else reciprocal_rank_fusion(rankings)
            budget = min(options.budget_tokens, budget_for(mr.window, options.answer_max_tokens, len(task) // 3))
            chosen = [nodes[i] for i in within_budget(order, [n.tokens for n in nodes], budget)]
            tree: list[dict[str, Any]] = [{"node": n.index, "level": n.level, "source": n.source,
                                           "children": list(n.children), "text": n.text} for n in nodes if n.level > 0]
            mr.dir.write_json("tree.json", {"levels": levels, "summaries": tree})
            mr.log.update(levels=levels, clustering="kmeans" if vectors is not None else "reading order",
                          retrieved=[{"node": n.index, "level": n.level, "source": n.source} for n in chosen])
            reply = await mr.ask(ANSWER, render("raptor_answer", nodes=chosen, task=task),
                                 max_tokens=options.answer_max_tokens)
            mr.log["reply"] = reply
            return mr.finish(final_answer_line(reply))

    return run
