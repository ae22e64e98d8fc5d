"""linearrag: LinearRAG (Zhuang et al., 2025), a relation-free graph built without LLM calls.

Indexing costs no LLM call: each passage (a chunk of `chunk_tokens`) is cut into sentences, and the
entities of each sentence are found by a rule-based extractor (`extract_entities`; the authors use a
spaCy NER model, which cannot be installed here). Passage nodes link to their entities (weight: the
entity's share of the passage's entity mentions), and consecutive passages of a document to each other.
At query time the question's entities are matched to the closest graph entities (seeds, scored by
similarity); activation spreads in tiers: from each active entity, through its `top_k_sentence` sentences
most similar to the question and not used yet, to the entities of those sentences (score: entity score
times sentence similarity, kept at `iteration_threshold` or more) for up to `max_iterations` tiers.
Passages get `passage_ratio` times their normalised dense score plus log(1 + the activated entities'
bonus), times `passage_node_weight`; Personalized PageRank over the graph (entity activations and
passage scores as the reset) ranks the passages; the `top_k` go to the reader. Without question
entities, the dense ranking alone, as the authors do. Deviations: docs/baselines.md.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import Settings
from ..corpus.documents import Document
from ..llm.replies import final_answer_line
from ..notes.retrieval import ranking, within_budget
from ..prompts.render import render
from ..results import MethodFn, MethodOutcome
from ._common import budget_for, check_options, chunk_documents, method_run
from ._graph import min_max, personalized_pagerank, sentences, text_vectors

NAME = "linearrag"
DESCRIPTION = ("LinearRAG: relation-free entity/sentence graph built without LLM calls; question entities "
               "expanded through related sentences; PageRank over passages; top passages to the reader")
ANSWER_STAGE = "linearrag-answer"
EMBED_STAGE = "linearrag-embed"


@dataclass(frozen=True)
class Options:
    """Parameters of the LinearRAG baseline (defaults from the authors' configuration).

    chunk_tokens: size of a passage.
    max_iterations: tiers of activation, the seeds included.
    top_k_sentence: sentences followed from each active entity per tier.
    iteration_threshold: least score for an entity to be activated or to spread further.
    passage_ratio: weight of the dense passage score beside the entity bonus.
    passage_node_weight: scale of the passage scores in the PageRank reset.
    damping: PageRank's damping factor.
    top_k: passages given to the reader.
    budget_tokens: most tokens of passages in the reader's prompt (also bounded by the window).
    max_tokens: the answer's output budget.
    """

    chunk_tokens: int = 1000
    max_iterations: int = 3
    top_k_sentence: int = 1
    iteration_threshold: float = 0.5
    passage_ratio: float = 1.5
    passage_node_weight: float = 0.05
    damping: float = 0.5
    top_k: int = 5
    budget_tokens: int = 8192
    max_tokens: int = 4096


# ---- entities without a NER model ---------------------------------------------------------------------

_NAME = re.compile(r"\b[A-Z][\w&'-]*(?:[ \t]+(?:(?:of|the|and|de|van|von|for|&)[ \t]+)?[A-Z][\w&'-]*)*")
_ACRONYM_OR_NUMBER = re.compile(r"\b[A-Z]{2,}[\w-]*\b|\b\d[\d,.]*\s?(?:%|percent|million|billion|thousand)?")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_CJK_BREAKS = re.compile("[的了和与及或是在为对于将并而由从以等其中之该这那也都就被把向到上下个年月日]")
_COMMON = frozenset("""The A An This That These Those It Its In On At For By With From As Of And Or But If When While
He She They We You I His Her Their Our Your My There Here What Which Who Whom Whose Why How Where Then Thus
However Also After Before During Since Because Although Though Yet So Such Each Every All Some Any No Not To Do Does
Please Given Note Let Find List Answer Question Conversely Moreover Furthermore Finally First Second Third Is Are
Was Were Be Can Could Should Would Will May Must Only One Two Both Either Neither""".split())


def extract_entities(text: str) -> list[str]:
    """Entities of `text`, in order of first mention: capitalised name sequences (not a lone sentence
    opener like 'The'), acronyms and numbers, and CJK terms (runs of 2 to 8 characters between
    function characters and punctuation)."""
    found: list[str] = []
    for match in _NAME.finditer(text):
        words = match.group(0).split()
        while words and words[0] in _COMMON:
            words = words[1:]
        name = " ".join(words).strip(".")
        if len(name) > 1:
            found.append(name)
    found.extend(m.group(0).strip().rstrip(".,") for m in _ACRONYM_OR_NUMBER.finditer(text)
                 if len(m.group(0).strip().rstrip(".,")) > 1)
    for run in _CJK_RUN.findall(text):
        found.extend(piece for piece in _CJK_BREAKS.split(run) if 2 <= len(piece) <= 8)
    return list(dict.fromkeys(found))


# ---- the graph -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Index:
    """The relation-free graph: entities, sentences, passages and who holds whom."""

    entities: tuple[str, ...]
    sentences: tuple[str, ...]
    sentence_entities: tuple[frozenset[int], ...]
    entity_sentences: tuple[frozenset[int], ...]
    passage_entities: tuple[Mapping[int, float], ...]  # entity -> its share of the passage's mentions
    adjacent: tuple[tuple[int, int], ...]  # consecutive passages of one document


def build_index(passages: Sequence[str], docs: Sequence[int]) -> Index:
    """Entities and sentences of each passage, and the graph's edges, without any model."""
    entity_ids: dict[str, int] = {}
    sentence_list: list[str] = []
    sentence_entities: list[frozenset[int]] = []
    entity_sentences: dict[int, set[int]] = {}
    passage_entities: list[dict[int, float]] = []
    for text in passages:
        counts: Counter[int] = Counter()
        held: set[str] = set()
        for sentence in sentences(text):
            names = extract_entities(sentence)
            held.update(names)
            ids = frozenset(entity_ids.setdefault(e, len(entity_ids)) for e in names)
            if not ids:
                continue
            for i in ids:
                entity_sentences.setdefault(i, set()).add(len(sentence_list))
            sentence_list.append(sentence)
            sentence_entities.append(ids)
        for name in held:
            counts[entity_ids[name]] = max(1, text.count(name))
        total = sum(counts.values()) or 1
        passage_entities.append({i: n / total for i, n in counts.items()})
    adjacent = tuple((i, i + 1) for i in range(len(passages) - 1) if docs[i] == docs[i + 1])
    entities = tuple(sorted(entity_ids, key=entity_ids.__getitem__))
    return Index(entities, tuple(sentence_list), tuple(sentence_entities),
                 tuple(frozenset(entity_sentences.get(i, ())) for i in range(len(entities))),
                 tuple(passage_entities), adjacent)


@dataclass(frozen=True)
class Activation:
    """An activated entity: its score and the tier that reached it (1 for a seed)."""

    score: float
    tier: int


def expand(index: Index, seeds: Mapping[int, float], sentence_sims: np.ndarray, options: Options) -> dict[int, Activation]:
    """Spread activation from the seed entities through the sentences most similar to the question."""
    active = {e: Activation(s, 1) for e, s in seeds.items()}
    current = dict(active)
    used: set[int] = set()
    tier = 1
    while current and tier < options.max_iterations:
        new: dict[int, Activation] = {}
        for entity, act in current.items():
            if act.score < options.iteration_threshold:
                continue
            open_sentences = [s for s in sorted(index.entity_sentences[entity]) if s not in used]
            best = sorted(open_sentences, key=lambda s: (-sentence_sims[s], s))[:options.top_k_sentence]
            for s in best:
                used.add(s)
                for nxt in index.sentence_entities[s]:
                    score = act.score * float(sentence_sims[s])
                    if score >= options.iteration_threshold and nxt not in active:
                        previous = new.get(nxt)
                        new[nxt] = Activation(score + (previous.score if previous else 0.0), tier + 1)
        active.update(new)
        current = new
        tier += 1
    return active


def passage_weights(index: Index, passages: Sequence[str], active: Mapping[int, Activation],
                    dense: np.ndarray, options: Options) -> np.ndarray:
    """Each passage's reset weight: dense score and the bonus of the activated entities it mentions."""
    normalised = min_max(dense)
    out = np.zeros(len(passages))
    lowered = [p.lower() for p in passages]
    for p, text in enumerate(lowered):
        bonus = 0.0
        for entity, act in active.items():
            n = text.count(index.entities[entity].lower())
            if n:
                bonus += act.score * math.log(1 + n) / max(1, act.tier)
        out[p] = (options.passage_ratio * normalised[p] + math.log(1 + bonus)) * options.passage_node_weight
    return out


def rank(index: Index, active: Mapping[int, Activation], weights: np.ndarray, damping: float) -> list[int]:
    """Passages by Personalized PageRank over entity and passage nodes (entities first), best first."""
    n_entities, n_passages = len(index.entities), len(weights)
    edges: list[tuple[int, int]] = []
    edge_weights: list[float] = []
    for p, held in enumerate(index.passage_entities):
        for e, w in held.items():
            edges.append((n_entities + p, e))
            edge_weights.append(w)
    for a, b in index.adjacent:
        edges.append((n_entities + a, n_entities + b))
        edge_weights.append(1.0)
    reset = np.zeros(n_entities + n_passages)
    for e, act in active.items():
        reset[e] += act.score
    reset[n_entities:] += weights
    scores = personalized_pagerank(n_entities + n_passages, edges, edge_weights, reset, damping)[n_entities:]
    return ranking(scores)


def method(options: Options = Options()) -> MethodFn:
    """The method with these options, for `r3con.methods.register`."""
    check_options(options)

    async def run(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        async with method_run(NAME, task, documents, settings, run_dir, options) as mr:
            chunks = chunk_documents(documents, options.chunk_tokens)
            texts = [f"{c.title}\n{c.text}" for c in chunks]
            index = build_index(texts, [c.doc for c in chunks])
            asked = extract_entities(task)
            (entity_vecs, sentence_vecs, passage_vecs, query_vecs), kind = await text_vectors(
                mr, EMBED_STAGE, [list(index.entities), list(index.sentences), texts, [task, *asked]])
            dense = passage_vecs @ query_vecs[0]
            seeds: dict[int, float] = {}
            if asked and index.entities:
                sims = entity_vecs @ query_vecs[1:].T  # graph entities x question entities
                for q in range(len(asked)):
                    best = int(np.argmax(sims[:, q]))
                    seeds[best] = max(seeds.get(best, 0.0), float(sims[best, q]))
            if seeds:
                active = expand(index, seeds, sentence_vecs @ query_vecs[0], options)
                order = rank(index, active, passage_weights(index, texts, active, dense, options), options.damping)
            else:
                active, order = {}, ranking(dense.tolist())
            budget = min(options.budget_tokens, budget_for(mr.window, options.max_tokens, len(task) // 3))
            picked = [chunks[i] for i in within_budget(order, [c.tokens for c in chunks], budget, options.top_k)]
            mr.log.update(
                vectors=kind, chunks=len(chunks), entities=len(index.entities), sentences=len(index.sentences),
                question_entities=asked, ranking="ppr" if seeds else "dense",
                activated=[{"entity": index.entities[e], "score": round(a.score, 4), "tier": a.tier}
                           for e, a in sorted(active.items(), key=lambda x: (-x[1].score, x[0]))[:50]],
                retrieved=[{"chunk": c.index, "doc": c.doc, "tokens": c.tokens} for c in picked])
            reply = await mr.ask(ANSWER_STAGE, render("linearrag_answer", task=task, passages=picked),
                                 max_tokens=options.max_tokens)
            mr.log["reply"] = reply
            return mr.finish(final_answer_line(reply))

    return run
