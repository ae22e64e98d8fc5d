"""arag: A-RAG (Du et al., 2026, "Scaling agentic RAG via hierarchical retrieval interfaces").

Retrieval is not a preprocessing step: the model gets three interfaces at different granularities and
decides when and how to use them, in a ReAct-style tool-calling loop of at most `max_turns` turns (the
authors' `max_loops`, 15): `keyword_search` (exact, case-insensitive matching of a list of keywords;
a chunk scores the sum over keywords of occurrences times keyword length), `semantic_search` (cosine
between the query and every sentence; a chunk scores by its best sentence; the embeddings endpoint when
`--embedding-model` is set, else hashed TF-IDF vectors), both returning chunk ids with the matching
sentences as snippets, and `chunk_read`, the full text of chunks by id, with a context tracker that
refuses to send a chunk already read. It answers when it answers without a tool call.
Deviations: docs/baselines.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import Settings
from ..corpus.documents import Document
from ..notes.retrieval import ranking
from ..prompts.render import render
from ..results import MethodFn, MethodOutcome
from ._common import Chunk, MethodRun, check_options, chunk_documents, method_run
from ._graph import lexical_vectors, sentences, text_vectors
from ._toolagent import AgentLimits, Tool, ToolError, run_tool_agent

NAME = "arag"
DESCRIPTION = "A-RAG: a tool-calling agent with keyword search, sentence-level semantic search and chunk reading (max 15 turns)"
STAGE = "arag-agent"
EMBED_STAGE = "arag-embed"


@dataclass(frozen=True)
class Options:
    """Parameters of the A-RAG baseline.

    chunk_tokens: size of a chunk.
    max_turns: model turns before the forced final answer (the authors' max_loops).
    results: chunks each search returns.
    snippet_chars: length of a search result's snippets.
    max_read: most chunks one chunk_read call returns.
    max_tokens: output budget of each turn.
    observation_chars: most characters of one tool result the model sees.
    """

    chunk_tokens: int = 1000
    max_turns: int = 15
    results: int = 5
    snippet_chars: int = 300
    max_read: int = 5
    max_tokens: int = 4096
    observation_chars: int = 12_000


QueryEmbedder = Callable[[str], Awaitable[np.ndarray]]


def keyword_scores(texts: list[str], keywords: list[str]) -> list[float]:
    """A-RAG's keyword score of each text: sum over keywords of (case-insensitive occurrences x keyword length)."""
    lowered = [t.lower() for t in texts]
    words = [k.lower().strip() for k in keywords if k.strip()]
    return [float(sum(t.count(k) * len(k) for k in words)) for t in lowered]


@dataclass(frozen=True)
class Corpus:
    """The chunks, their sentences (which chunk each belongs to) and the sentences' vectors."""

    chunks: list[Chunk]
    sentences: list[str]
    sentence_chunk: list[int]
    vectors: np.ndarray


def split_corpus(chunks: list[Chunk]) -> tuple[list[str], list[int]]:
    """Every chunk's sentences, and the chunk each one comes from."""
    out, owner = [], []
    for i, chunk in enumerate(chunks):
        for sentence in sentences(chunk.text) or [chunk.text]:
            out.append(" ".join(sentence.split()))
            owner.append(i)
    return out, owner


def corpus_tools(corpus: Corpus, embed_query: QueryEmbedder, options: Options) -> list[Tool]:
    """The three interfaces over the corpus (`embed_query`: async text -> a row comparable with its vectors)."""
    chunks = corpus.chunks
    read: dict[int, int] = {}  # the context tracker: chunk -> the call that sent it
    calls = [0]

    def listing(order: list[int], snippets: dict[int, list[str]]) -> str:
        lines = [f"chunk {i} (document {chunks[i].doc}: {chunks[i].title}): "
                 + " ... ".join(snippets.get(i, []))[:options.snippet_chars] for i in order[:options.results]]
        return "\n".join(lines) or "no chunk matches"

    async def keyword_search(keywords: list[str]) -> str:
        scores = keyword_scores([c.text for c in chunks], keywords)
        order = [i for i in ranking(scores) if scores[i] > 0]
        words = [k.lower() for k in keywords if k.strip()]
        snippets = {i: [s for s, owner in zip(corpus.sentences, corpus.sentence_chunk, strict=True)
                        if owner == i and any(w in s.lower() for w in words)][:2] for i in order[:options.results]}
        return listing(order, snippets)

    async def semantic_search(query: str) -> str:
        sims = corpus.vectors @ await embed_query(query) if len(corpus.sentences) else np.zeros(0)
        best: dict[int, tuple[float, str]] = {}
        for j in np.argsort(-sims, kind="stable"):
            owner = corpus.sentence_chunk[int(j)]
            if owner not in best:
                best[owner] = (float(sims[j]), corpus.sentences[int(j)])
            if len(best) >= options.results:
                break
        order = sorted(best, key=lambda i: (-best[i][0], i))
        return listing(order, {i: [best[i][1]] for i in order})

    async def chunk_read(chunk_ids: list[int]) -> str:
        calls[0] += 1
        parts = []
        for chunk_id in chunk_ids:
            if not 0 <= chunk_id < len(chunks):
                raise ToolError(f"there is no chunk {chunk_id}; chunk ids run from 0 to {len(chunks) - 1}")
            if chunk_id in read:
                parts.append(f"[chunk {chunk_id} was already read (read call {read[chunk_id]}); it is above]")
                continue
            read[chunk_id] = calls[0]
            c = chunks[chunk_id]
            parts.append(f"[chunk {chunk_id}, document {c.doc}: {c.title}]\n{c.text}")
        return "\n\n".join(parts)

    strings = {"type": "array", "items": {"type": "string"}, "minItems": 1}
    return [
        Tool("keyword_search", "Exact, case-insensitive search for keywords (names, numbers, terms); returns chunk ids "
             "with the sentences that contain them.",
             {"type": "object", "properties": {"keywords": {**strings, "description": "keywords to match exactly"}},
              "required": ["keywords"], "additionalProperties": False}, keyword_search),
        Tool("semantic_search", "Search sentences by meaning, for a concept or paraphrase; returns chunk ids with "
             "the closest sentence.",
             {"type": "object", "properties": {"query": {"type": "string", "description": "what to look for"}},
              "required": ["query"], "additionalProperties": False}, semantic_search),
        Tool("chunk_read", "The full text of chunks by id (read promising chunks from a search, and the chunks "
             "before and after, id - 1 and id + 1, for context). A chunk already read is not sent again.",
             {"type": "object", "properties": {"chunk_ids": {
                 "type": "array", "items": {"type": "integer", "minimum": 0, "maximum": max(0, len(chunks) - 1)},
                 "minItems": 1, "maxItems": options.max_read, "description": "chunk ids from search results"}},
              "required": ["chunk_ids"], "additionalProperties": False}, chunk_read),
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
            sentence_list, owners = split_corpus(chunks)
            (vectors,), kind = await text_vectors(mr, EMBED_STAGE, [sentence_list])
            corpus = Corpus(chunks, sentence_list, owners, vectors)
            tools = corpus_tools(corpus, await _query_embedder(mr, kind, sentence_list), options)
            system = render("arag_system", documents=len(documents), chunks=len(chunks), max_turns=options.max_turns)
            first = render("tool_task", task=task)
            limits = AgentLimits(options.max_turns, options.max_tokens, settings.temperature, options.observation_chars)
            result = await run_tool_agent(mr.llm, stage=STAGE, system=system, task=first.text, tools=tools,
                                          limits=limits)
            mr.log.update(vectors=kind, chunks=len(chunks), sentences=len(sentence_list), turns=result.turns,
                          steps=[s.to_dict() for s in result.steps])
            return mr.finish(result.answer, capped=result.capped)

    return run
