"""rag: chunk the documents, retrieve the best chunks for the task within a token budget, answer.

Retrieval-augmented generation as in Lewis et al. (2020) with a lexical retriever (BM25, Robertson
and Zaragoza, 2009) and, where an embeddings model is configured (`--embedding-model`, served at
`/v1/embeddings`), a dense one too; the two rankings are fused by reciprocal rank (Cormack et al.,
2009). Chunks are taken best first while they fit `budget_tokens` (and the window), at most `top_k`,
then shown in rank order to one answer call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..corpus.documents import Document
from ..llm.replies import final_answer_line
from ..notes.retrieval import BM25, cosine_scores, ranking, reciprocal_rank_fusion, within_budget
from ..prompts.render import render
from ..results import MethodFn, MethodOutcome
from ._common import budget_for, check_options, chunk_documents, method_run

NAME = "rag"
DESCRIPTION = "chunks ranked by BM25 (fused with dense retrieval when --embedding-model is set), top-k in a token budget"
STAGE = "rag-answer"
EMBED_STAGE = "rag-embed"


@dataclass(frozen=True)
class Options:
    """Parameters of the RAG baseline.

    chunk_tokens: size of a chunk (documents are cut at paragraph, sentence or word breaks).
    top_k: most chunks retrieved.
    budget_tokens: most tokens of retrieved text in the prompt (also bounded by the window).
    dense: use the embeddings endpoint when `embedding_model` is configured (False: BM25 only).
    rrf_k: the constant of reciprocal rank fusion.
    max_tokens: the answer's output budget.
    """

    chunk_tokens: int = 512
    top_k: int = 16
    budget_tokens: int = 8192
    dense: bool = True
    rrf_k: int = 60
    max_tokens: int = 4096


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr:
            chunks = chunk_documents(documents, options.chunk_tokens)
            texts = [f"{c.title}\n{c.text}" for c in chunks]
            rankings = [BM25(texts).top_k(task, len(texts))]
            retrievers = ["bm25"]
            if options.dense:
                async with mr.llm.embedder(settings, EMBED_STAGE) as emb:
                    if emb is not None:
                        vectors = await emb.embed([*texts, task])
                        rankings.append(ranking(cosine_scores(vectors[-1], vectors[:-1])))
                        retrievers.append("dense")
            order = rankings[0] if len(rankings) == 1 else reciprocal_rank_fusion(rankings, options.rrf_k)
            budget = min(options.budget_tokens,
                         budget_for(mr.window, options.max_tokens, len(task) // 3, 30 * options.top_k))
            chosen = within_budget(order, [c.tokens for c in chunks], budget, options.top_k)
            passages = [chunks[i] for i in chosen]
            mr.log.update(retrievers=retrievers, chunks=len(chunks), budget_tokens=budget,
                          retrieved=[{"chunk": c.index, "doc": c.doc, "tokens": c.tokens} for c in passages])
            reply = await mr.ask(STAGE, render("rag_answer", task=task, passages=passages), max_tokens=options.max_tokens)
            mr.log["reply"] = reply
            return mr.finish(final_answer_line(reply))

    return run
