"""arag: A-RAG (agentic retrieval through hierarchical retrieval interfaces), a tool-calling agent over chunks.

As in the A-RAG paper, retrieval is not a preprocessing step: the model gets three interfaces at
different granularities and decides when and how to use them, in a loop of at most `max_turns` turns:
`keyword_search` (lexical, BM25 over the chunks), `semantic_search` (the embeddings endpoint when
`--embedding-model` is set, else hashed TF-IDF vectors) that return chunk ids with the best-matching
sentence as a snippet, and `read_chunk`, the full text of a chunk (optionally with its neighbours in
the same document). It answers when it answers without a tool call. Deviations: docs/baselines.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._prompts import render
from ..config import Settings
from ..corpus import Document
from ..results import MethodFn, MethodOutcome
from ..retrieval import BM25, ranking, tokenize
from ._common import Chunk, MethodRun, check_options, chunk_documents, method_run
from ._graph import lexical_vectors, text_vectors
from ._toolagent import Tool, ToolError, run_tool_agent
from .linearrag import sentences

NAME = "arag"
DESCRIPTION = "A-RAG: a tool-calling agent with keyword search (BM25), semantic search and chunk reading (max 20 turns)"
STAGE = "arag-agent"
EMBED_STAGE = "arag-embed"


@dataclass(frozen=True)
class Options:
    """Parameters of the A-RAG baseline.

    chunk_tokens: size of a chunk.
    max_turns: model turns before the forced final answer.
    results: chunks each search returns.
    snippet_chars: length of a search result's snippet.
    max_tokens: output budget of each turn.
    observation_chars: most characters of one tool result the model sees.
    """

    chunk_tokens: int = 1000
    max_turns: int = 20
    results: int = 5
    snippet_chars: int = 300
    max_tokens: int = 4096
    observation_chars: int = 12_000


def snippet(text: str, query: str, limit: int) -> str:
    """The sentence of `text` sharing most words with `query` (the first on ties), cut to `limit`."""
    words = set(tokenize(query))
    best = max(sentences(text) or [text], key=lambda s: len(words & set(tokenize(s))))
    return " ".join(best.split())[:limit]


QueryEmbedder = Callable[[str], Awaitable[np.ndarray]]


def corpus_tools(chunks: list[Chunk], vectors: np.ndarray, embed_query: QueryEmbedder, options: Options) -> list[Tool]:
    """The three interfaces over `chunks` (`vectors`: one row per chunk; `embed_query`: async text -> row)."""
    bm25 = BM25([f"{c.title}\n{c.text}" for c in chunks])

    def listing(order: list[int], query: str) -> str:
        lines = [f"chunk {i} (document {chunks[i].doc}: {chunks[i].title}): "
                 f"{snippet(chunks[i].text, query, options.snippet_chars)}" for i in order[:options.results]]
        return "\n".join(lines) or "no chunk matches"

    async def keyword_search(keywords: str) -> str:
        scores = bm25.scores(keywords)
        return listing([i for i in ranking(scores) if scores[i] > 0], keywords)

    async def semantic_search(query: str) -> str:
        row = await embed_query(query)
        return listing(ranking((vectors @ row).tolist()), query)

    async def read_chunk(chunk_id: int, neighbours: bool = False) -> str:
        if not 0 <= chunk_id < len(chunks):
            raise ToolError(f"there is no chunk {chunk_id}; chunk ids run from 0 to {len(chunks) - 1}")
        ids = [chunk_id]
        if neighbours:
            ids = [i for i in (chunk_id - 1, chunk_id, chunk_id + 1)
                   if 0 <= i < len(chunks) and chunks[i].doc == chunks[chunk_id].doc]
        return "\n\n".join(f"[chunk {i}, document {chunks[i].doc}: {chunks[i].title}]\n{chunks[i].text}" for i in ids)

    text = {"type": "string"}
    return [
        Tool("keyword_search", "Lexical search (BM25) for exact words, names or numbers; returns chunk ids and snippets.",
             {"type": "object", "properties": {"keywords": {**text, "description": "words to match"}},
              "required": ["keywords"], "additionalProperties": False}, keyword_search),
        Tool("semantic_search", "Search by meaning for a concept or paraphrase; returns chunk ids and snippets.",
             {"type": "object", "properties": {"query": {**text, "description": "what to look for"}},
              "required": ["query"], "additionalProperties": False}, semantic_search),
        Tool("read_chunk", "The full text of one chunk, optionally with its neighbours in the same document.",
             {"type": "object", "properties": {
                 "chunk_id": {"type": "integer", "minimum": 0, "maximum": max(0, len(chunks) - 1),
                              "description": "a chunk id from a search result"},
                 "neighbours": {"type": "boolean", "description": "also the chunks before and after"}},
              "required": ["chunk_id"], "additionalProperties": False}, read_chunk),
    ]


async def _query_embedder(mr: MethodRun, kind: str, texts: list[str]) -> QueryEmbedder:
    """An async function turning a query into a row comparable with the chunk vectors."""
    if kind == "dense":
        async def dense(query: str) -> np.ndarray:
            (rows,), _ = await text_vectors(mr, EMBED_STAGE, [[query]])
            return rows[0]
        return dense

    async def lexical(query: str) -> np.ndarray:
        return lexical_vectors([*texts, query])[-1]  # same idf space as the chunks
    return lexical


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr:
            chunks = chunk_documents(documents, options.chunk_tokens)
            texts = [f"{c.title}\n{c.text}" for c in chunks]
            (vectors,), kind = await text_vectors(mr, EMBED_STAGE, [texts])
            tools = corpus_tools(chunks, vectors, await _query_embedder(mr, kind, texts), options)
            system = render("arag_system", documents=len(documents), chunks=len(chunks), max_turns=options.max_turns)
            first = render("tool_task", task=task)
            result = await run_tool_agent(
                mr.llm, stage=STAGE, system=system.text, task=first.text, tools=tools, max_turns=options.max_turns,
                max_tokens=options.max_tokens, temperature=settings.temperature,
                observation_chars=options.observation_chars, prompt_name=system.name, prompt_hash=system.hash)
            mr.log.update(vectors=kind, chunks=len(chunks), turns=result.turns,
                          steps=[s.to_dict() for s in result.steps])
            return mr.finish(result.answer, capped=result.capped)

    return run
