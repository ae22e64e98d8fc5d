"""The comparison methods, each a small module with its own documented options and stage names.

    longcontext  all documents in one prompt, up to the window (fair truncation)
    codeagent    a smolagents-style coding agent over the raw documents
    rlm          a recursive language model: documents in the REPL, llm_query on slices
    structrag    router -> per-document structurizer -> utilizer (StructRAG)
    rag          chunks, BM25 (+ dense) retrieval within a token budget, one answer
    memagent     chunks read in order into a bounded, overwritten memory (MemAgent)
    readagent    gist memory of pages, look-ups, answer (ReadAgent)
    raptor       a tree of recursive summaries, collapsed-tree retrieval (RAPTOR)
    hipporag     LLM OpenIE graph, recognition filter, Personalized PageRank (HippoRAG 2)
    linearrag    relation-free entity/sentence graph without LLM indexing, PageRank (LinearRAG)
    arag         tool-calling agent: keyword search, semantic search, chunk reading (A-RAG)
    fileagent    Claude-Code-style file agent: list, grep, read lines, run Python via tool calls

Each module has `Options` (a frozen dataclass), `method(options) -> MethodFn` and `DESCRIPTION`;
`BASELINES` maps each name to its method with default options. Register a variant with, e.g.,
`r3con.methods.register("rag-k32", rag.method(rag.Options(top_k=32)))`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ..results import MethodFn
from . import (
    arag,
    codeagent,
    fileagent,
    hipporag,
    linearrag,
    longcontext,
    memagent,
    rag,
    raptor,
    readagent,
    rlm,
    structrag,
)

_MODULES = (longcontext, codeagent, rlm, structrag, rag, memagent, readagent, raptor, hipporag, linearrag, arag,
            fileagent)

BASELINES: Mapping[str, MethodFn] = MappingProxyType({m.NAME: m.method() for m in _MODULES})
DESCRIPTIONS: Mapping[str, str] = MappingProxyType({m.NAME: m.DESCRIPTION for m in _MODULES})
OPTIONS: Mapping[str, Any] = MappingProxyType({m.NAME: m.Options for m in _MODULES})
"""Each baseline's `Options` dataclass, by name."""
FACTORIES: Mapping[str, Callable[[Any], MethodFn]] = MappingProxyType({m.NAME: m.method for m in _MODULES})
"""Each baseline's `method(options)`, by name."""

__all__ = ["BASELINES", "DESCRIPTIONS", "FACTORIES", "OPTIONS", "arag", "codeagent", "fileagent", "hipporag",
           "linearrag", "longcontext", "memagent", "rag", "raptor", "readagent", "rlm", "structrag"]
