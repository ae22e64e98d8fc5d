"""hipporag: HippoRAG 2 (Gutiérrez et al., 2025, "From RAG to Memory"), graph memory with Personalized PageRank.

Indexing, per passage (a chunk of `chunk_tokens`): LLM open information extraction, named entities
first, then triples over them. The graph has a phrase node per distinct subject or object and a
passage node per chunk, relation edges between a triple's subject and object, context edges between
a passage and the phrases of its triples, and synonym edges between phrases whose vectors are close
(cosine at least `synonym_threshold`, the `synonym_top_k` nearest). At query time the triples most
similar to the question (`link_top_k`) are filtered by the LLM ("recognition memory"); the phrases of
the kept triples seed Personalized PageRank with their triple's score (divided by how many passages
hold the phrase), beside every passage's dense score times `passage_node_weight`; the `top_k` passages
by PageRank go to the reader. Without kept triples, passages are ranked by the dense score alone,
as HippoRAG 2 does. Deviations from the authors' code: docs/baselines.md.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from jsonschema import Draft202012Validator

from ..config import Settings
from ..corpus.documents import Document
from ..errors import OutputError
from ..llm.json_reply import NoJSON, extract_json
from ..llm.replies import final_answer_line, reply_text
from ..llm.types import ChatRequest, Message
from ..notes.retrieval import ranking, within_budget
from ..prompts.render import Rendered, render
from ..results import MethodFn, MethodOutcome
from ._common import Chunk, MethodRun, budget_for, check_options, chunk_documents, method_run
from ._graph import min_max, personalized_pagerank, text_vectors

NAME = "hipporag"
DESCRIPTION = ("HippoRAG 2: LLM OpenIE triples -> phrase/passage graph with synonym edges; "
               "recognition-filtered triples seed Personalized PageRank; top passages to the reader")
NER_STAGE, TRIPLES_STAGE, FILTER_STAGE, ANSWER_STAGE = "hipporag-ner", "hipporag-triples", "hipporag-filter", "hipporag-answer"
EMBED_STAGE = "hipporag-embed"

_STRINGS = {"type": "array", "items": {"type": "string"}}
_TRIPLES = {"type": "array", "items": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}}
NER_SCHEMA = {"type": "object", "properties": {"named_entities": _STRINGS}, "required": ["named_entities"]}
TRIPLES_SCHEMA = {"type": "object", "properties": {"triples": _TRIPLES}, "required": ["triples"]}
FILTER_SCHEMA = {"type": "object", "properties": {"fact": _TRIPLES}, "required": ["fact"]}


@dataclass(frozen=True)
class Options:
    """Parameters of the HippoRAG 2 baseline (defaults from the authors' configuration where it has one).

    chunk_tokens: size of a passage.
    link_top_k: triples retrieved for the question and offered to the recognition filter (and phrases kept as seeds).
    synonym_threshold: least cosine similarity for a synonym edge between two phrases.
    synonym_top_k: nearest phrases considered for each phrase's synonym edges.
    passage_node_weight: weight of the dense passage scores in the PageRank reset, beside the phrases'.
    damping: PageRank's damping factor (the probability of following an edge).
    top_k: passages given to the reader.
    budget_tokens: most tokens of passages in the reader's prompt (also bounded by the window).
    extract_tokens: output budget of each extraction call.
    max_tokens: the answer's output budget.
    """

    chunk_tokens: int = 1000
    link_top_k: int = 5
    synonym_threshold: float = 0.8
    synonym_top_k: int = 100
    passage_node_weight: float = 0.05
    damping: float = 0.5
    top_k: int = 5
    budget_tokens: int = 8192
    extract_tokens: int = 2048
    max_tokens: int = 4096


def phrase_key(text: str) -> str:
    """A phrase as a graph node: lower-cased, without punctuation at the ends, single spaces."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


@dataclass(frozen=True)
class Graph:
    """Phrase and passage nodes (phrases first, then passages) and weighted undirected edges."""

    phrases: tuple[str, ...]
    passages: int
    edges: tuple[tuple[int, int], ...]
    weights: tuple[float, ...]
    phrase_passages: Mapping[str, frozenset[int]]  # which passages each phrase occurs in


def build_graph(triples_per_passage: Sequence[Sequence[tuple[str, str, str]]], phrase_vectors: np.ndarray | None,
                phrases: Sequence[str], options: Options) -> Graph:
    """The HippoRAG 2 graph: relation, context and synonym edges (weights summed per node pair)."""
    index = {p: i for i, p in enumerate(phrases)}
    weight: dict[tuple[int, int], float] = {}

    def add(a: int, b: int, w: float) -> None:
        if a != b:
            key = (min(a, b), max(a, b))
            weight[key] = weight.get(key, 0.0) + w

    occurs: dict[str, set[int]] = {}
    for passage, triples in enumerate(triples_per_passage):
        node = len(phrases) + passage
        for s, _, o in triples:
            add(index[s], index[o], 1.0)  # relation edge
            for phrase in (s, o):
                occurs.setdefault(phrase, set()).add(passage)
                weight[(index[phrase], node)] = 1.0  # context edge, once per passage and phrase
    if phrase_vectors is not None and len(phrases) > 1:
        sims = phrase_vectors @ phrase_vectors.T
        np.fill_diagonal(sims, -1.0)
        k = min(options.synonym_top_k, len(phrases) - 1)
        for i in range(len(phrases)):
            nearest = np.argpartition(-sims[i], k - 1)[:k] if k < len(phrases) - 1 else np.arange(len(phrases))
            for j in nearest:
                if j != i and sims[i, j] >= options.synonym_threshold:
                    key = (min(i, int(j)), max(i, int(j)))
                    weight.setdefault(key, float(sims[i, j]))  # synonym edge (not added twice from both ends)
    edges = tuple(weight)
    return Graph(tuple(phrases), len(triples_per_passage), edges, tuple(weight[e] for e in edges),
                 {p: frozenset(ps) for p, ps in occurs.items()})


def reset_weights(graph: Graph, facts: Sequence[tuple[tuple[str, str, str], float]], passage_scores: np.ndarray,
                  options: Options) -> np.ndarray:
    """The PageRank reset: each kept fact's score on its subject and object (divided by the passages holding
    the phrase, averaged over the phrase's facts, the best `link_top_k` phrases kept), plus the passages'
    min-max-normalised dense scores times `passage_node_weight`."""
    phrase_index = {p: i for i, p in enumerate(graph.phrases)}
    total = np.zeros(len(graph.phrases) + graph.passages)
    seen = np.zeros(len(graph.phrases))
    for (s, _, o), score in facts:
        for phrase in (s, o):
            i = phrase_index.get(phrase)
            if i is None:
                continue
            total[i] += score / max(1, len(graph.phrase_passages.get(phrase, ())))
            seen[i] += 1
    phrase_part = total[:len(graph.phrases)]
    phrase_part[seen > 0] /= seen[seen > 0]
    if np.count_nonzero(phrase_part) > options.link_top_k:
        cutoff = np.sort(phrase_part)[-options.link_top_k]
        phrase_part[phrase_part < cutoff] = 0.0
    total[len(graph.phrases):] = min_max(passage_scores) * options.passage_node_weight
    return total


def rank_passages(graph: Graph, reset: np.ndarray, damping: float) -> list[int]:
    """Passages by their Personalized PageRank score, best first (ties in corpus order)."""
    scores = personalized_pagerank(len(graph.phrases) + graph.passages, graph.edges, graph.weights, reset, damping)
    passage_scores = scores[len(graph.phrases):]
    return ranking(passage_scores)


async def _ask_json(mr: MethodRun, stage: str, prompt: Rendered, schema: Mapping[str, Any], max_tokens: int,
                    doc: int | None = None, part: int | None = None, reasks: int = 1) -> dict[str, Any]:
    """The reply's JSON object; a reply without one, or that breaks `schema`, is asked again `reasks` times
    with the problem, then raises OutputError (a per-passage failure for the fan-out)."""
    messages: tuple[Message, ...] = (Message("user", prompt.text),)
    for _ in range(reasks + 1):
        completion = await mr.llm.complete(ChatRequest(
            messages=messages, stage=stage, doc=doc, part=part, max_tokens=max_tokens,
            temperature=mr.settings.temperature, response_schema=schema, schema_name=stage.replace("-", "_"),
            prompt_name=prompt.name, prompt_hash=prompt.hash))
        text = reply_text(completion)
        try:
            value, _ = extract_json(text)
            problem = next((e.message for e in Draft202012Validator(dict(schema)).iter_errors(value)), None)
        except NoJSON as exc:
            problem = f"the reply holds no JSON object ({exc})"
        if problem is None:
            return dict(value)
        messages = (*messages, Message("assistant", text),
                    Message("user", render("json_retry", problem=problem).text))
    raise OutputError(f"{stage}: {problem} after {reasks + 1} attempts")


def _clean_triples(raw: object) -> list[tuple[str, str, str]]:
    out = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item):
            s, p, o = phrase_key(item[0]), " ".join(item[1].split()), phrase_key(item[2])
            if s and o and p:
                out.append((s, p, o))
    return out


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr:
            chunks = chunk_documents(documents, options.chunk_tokens)

            async def openie(chunk: Chunk) -> list[tuple[str, str, str]]:
                ner = await _ask_json(mr, NER_STAGE, render("hipporag_ner", title=chunk.title, text=chunk.text),
                                      NER_SCHEMA, options.extract_tokens, doc=chunk.doc, part=chunk.index)
                names = [n for n in ner.get("named_entities") or [] if isinstance(n, str)]
                found = await _ask_json(mr, TRIPLES_STAGE, render(
                    "hipporag_triples", title=chunk.title, text=chunk.text,
                    entities=json.dumps({"named_entities": names}, ensure_ascii=False),
                ), TRIPLES_SCHEMA, options.extract_tokens, doc=chunk.doc, part=chunk.index)
                return _clean_triples(found.get("triples"))

            extracted = await mr.each(TRIPLES_STAGE, chunks, openie, label=lambda c: f"chunk {c.index}")
            mr.check_failures(TRIPLES_STAGE, len(chunks))
            per_passage = [x or [] for x in extracted]
            facts = list(dict.fromkeys(f for triples in per_passage for f in triples))
            phrases = list(dict.fromkeys(p for s, _, o in facts for p in (s, o)))
            passages_text = [f"{c.title}\n{c.text}" for c in chunks]
            (phrase_vecs, fact_vecs, passage_vecs, query_vec), kind = await text_vectors(
                mr, EMBED_STAGE, [phrases, [" ".join(f) for f in facts], passages_text, [task]])
            graph = build_graph(per_passage, phrase_vecs, phrases, options)
            passage_scores = passage_vecs @ query_vec[0]
            fact_scores = min_max(fact_vecs @ query_vec[0]) if facts else np.zeros(0)
            candidates = [facts[i] for i in np.argsort(-fact_scores, kind="stable")[:options.link_top_k]]
            kept: list[tuple[tuple[str, str, str], float]] = []
            if candidates:
                chosen = await _ask_json(mr, FILTER_STAGE, render(
                    "hipporag_filter", task=task, limit=len(candidates),
                    facts=json.dumps({"fact": [list(f) for f in candidates]}, ensure_ascii=False),
                ), FILTER_SCHEMA, options.extract_tokens)
                kept = _recognised(_clean_triples(chosen.get("fact")), candidates, facts, fact_scores)
            if kept:
                order = rank_passages(graph, reset_weights(graph, kept, passage_scores, options), options.damping)
            else:
                order = ranking(passage_scores.tolist())
            budget = min(options.budget_tokens, budget_for(mr.window, options.max_tokens, len(task) // 3))
            picked = [chunks[i] for i in within_budget(order, [c.tokens for c in chunks], budget, options.top_k)]
            mr.log.update(vectors=kind, chunks=len(chunks), phrases=len(phrases), facts=len(facts),
                          edges=len(graph.edges), candidates=[list(f) for f in candidates],
                          kept=[list(f) for f, _ in kept], ranking="ppr" if kept else "dense",
                          retrieved=[{"chunk": c.index, "doc": c.doc, "tokens": c.tokens} for c in picked])
            reply = await mr.ask(ANSWER_STAGE, render("rag_answer", task=task, passages=picked),
                                 max_tokens=options.max_tokens)
            mr.log["reply"] = reply
            return mr.finish(final_answer_line(reply))

    return run


def _recognised(chosen: Sequence[tuple[str, str, str]], candidates: Sequence[tuple[str, str, str]],
                facts: Sequence[tuple[str, str, str]], scores: np.ndarray) -> list[tuple[tuple[str, str, str], float]]:
    """The filter's triples matched back to the candidates (closest by text, as the authors do), with their scores."""
    by_text = {" ".join(c): c for c in candidates}
    position = {f: i for i, f in enumerate(facts)}
    kept: dict[tuple[str, str, str], float] = {}
    for triple in chosen:
        match = difflib.get_close_matches(" ".join(triple), list(by_text), n=1, cutoff=0.6)
        if match:
            fact = by_text[match[0]]
            kept[fact] = float(scores[position[fact]])
    return list(kept.items())
