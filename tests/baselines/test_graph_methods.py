"""hipporag and linearrag: their distinctive steps (PageRank seeding and ranking, entity expansion) and runs."""

import numpy as np
import pytest

from r3con.baselines import hipporag, linearrag
from r3con.baselines._graph import lexical_vectors, personalized_pagerank

from ._helpers import CORPORA, check_outcome, logged_calls, run, task, transcript


def test_personalized_pagerank_concentrates_on_the_seed_and_its_neighbours():
    # a path 0 - 1 - 2 - 3 - 4: restarting at 0 ranks nodes by distance from it
    scores = personalized_pagerank(5, [(0, 1), (1, 2), (2, 3), (3, 4)], [1.0] * 4, [1, 0, 0, 0, 0], 0.5)
    assert scores == sorted(scores, reverse=True) and abs(sum(scores) - 1) < 1e-9


def _graph(options):
    # phrases a, b, c; passage 0 holds (a, rel, b), passage 1 holds (c, rel, b)... and passage 2 holds (c, rel, d)
    per_passage = [[("a", "rel", "b")], [("c", "rel", "b")], [("c", "rel", "d")]]
    phrases = ["a", "b", "c", "d"]
    return hipporag.build_graph(per_passage, np.eye(4), phrases, options)


def test_hipporag_graph_has_relation_context_and_synonym_edges():
    options = hipporag.Options(synonym_threshold=0.8)
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.0, 1.0]])  # b and d are synonyms (cosine 1)
    graph = hipporag.build_graph([[("a", "rel", "b")], [("c", "rel", "d")]], vectors, ["a", "b", "c", "d"], options)
    edges = dict(zip(graph.edges, graph.weights, strict=True))
    assert edges[(0, 1)] == 1.0 and edges[(2, 3)] == 1.0  # relation edges
    assert edges[(0, 4)] == edges[(1, 4)] == edges[(2, 5)] == edges[(3, 5)] == 1.0  # context edges to passages 4, 5
    assert edges[(1, 3)] == pytest.approx(1.0) and edges[(1, 2)] == pytest.approx(0.8)  # synonym edges at >= 0.8
    assert (0, 2) not in edges and graph.phrase_passages["b"] == frozenset({0})


def test_hipporag_seeds_pagerank_with_the_kept_facts_over_the_dense_ranking():
    options = hipporag.Options()
    graph = _graph(options)
    dense = np.array([0.9, 0.1, 0.5])  # dense retrieval alone puts passage 0 first
    reset = hipporag.reset_weights(graph, [(("c", "rel", "d"), 1.0)], dense, options)
    # the fact's phrases get its score divided by the passages holding them: c is in two, d in one
    assert reset[2] == pytest.approx(0.5) and reset[3] == pytest.approx(1.0) and reset[0] == reset[1] == 0
    assert list(reset[4:]) == pytest.approx([0.05, 0.0, 0.05 * 0.5])
    assert hipporag.rank_passages(graph, reset, options.damping)[0] == 2  # the passage of the fact wins
    no_facts = hipporag.reset_weights(graph, [], dense, options)
    assert hipporag.rank_passages(graph, no_facts, options.damping)[0] == 0


def test_linearrag_entities_without_a_ner_model():
    found = linearrag.extract_entities("The Count met Jonathan Harker in Bistritz. Revenue rose 12.5% to 3,400 million.")
    assert {"Count", "Jonathan Harker", "Bistritz", "12.5%", "3,400 million"} <= set(found) and "The" not in found
    assert {"英力特", "公允价值变动收益"} <= set(linearrag.extract_entities("英力特的公允价值变动收益为80万元。"))


def _index():
    passages = ["Alice met Bob. Bob founded Acme.", "Acme hired Carol.", "Dave sold Zeta."]
    return linearrag.build_index(passages, [1, 1, 2])


def test_linearrag_expands_entities_through_related_sentences():
    index = _index()
    ids = {e: i for i, e in enumerate(index.entities)}
    assert set(ids) == {"Alice", "Bob", "Acme", "Carol", "Dave", "Zeta"} and index.adjacent == ((0, 1),)
    sims = np.array([0.9, 0.8, 0.9, 0.9])  # similarity of each sentence to the question
    options = linearrag.Options(max_iterations=3, iteration_threshold=0.5)
    active = linearrag.expand(index, {ids["Alice"]: 1.0}, sims, options)
    assert active[ids["Alice"]] == linearrag.Activation(1.0, 1)
    assert active[ids["Bob"]].tier == 2 and active[ids["Bob"]].score == pytest.approx(0.9)
    assert active[ids["Acme"]].tier == 3 and active[ids["Acme"]].score == pytest.approx(0.72)  # 0.9 * 0.8
    assert ids["Carol"] not in active and ids["Dave"] not in active  # beyond max_iterations / unconnected
    strict = linearrag.expand(index, {ids["Alice"]: 1.0}, sims, linearrag.Options(iteration_threshold=0.95))
    assert set(strict) == {ids["Alice"]}


def test_linearrag_pagerank_ranks_the_passages_of_activated_entities_first():
    index = _index()
    ids = {e: i for i, e in enumerate(index.entities)}
    texts = ["Alice met Bob. Bob founded Acme.", "Acme hired Carol.", "Dave sold Zeta."]
    dense = np.array([0.0, 0.1, 0.9])  # dense alone prefers the unrelated passage
    active = {ids["Carol"]: linearrag.Activation(1.0, 1)}
    weights = linearrag.passage_weights(index, texts, active, dense, linearrag.Options())
    assert linearrag.rank(index, active, weights, 0.5)[0] == 1


def test_lexical_vectors_are_normalised_and_match_shared_words():
    rows = lexical_vectors(["Count Dracula's castle", "the castle of Count Dracula", "公允价值变动收益", "价值变动"])
    assert np.allclose(np.linalg.norm(rows, axis=1), 1, atol=1e-5)
    assert rows[0] @ rows[1] > 0.4 and rows[2] @ rows[3] > 0.3 and abs(rows[0] @ rows[2]) < 0.1


@pytest.mark.parametrize("corpus", CORPORA)
async def test_hipporag_runs_end_to_end(corpus, fake_server, tmp_path):
    options = hipporag.Options(chunk_tokens=4000 if corpus == "dracula" else 1000)
    outcome = await run(hipporag.method(options), task(corpus), fake_server, tmp_path)
    stages = {"hipporag-ner", "hipporag-triples", "hipporag-filter", "hipporag-answer"}
    check_outcome(outcome, fake_server, stages)
    log = transcript(outcome)
    assert outcome.by_stage["hipporag-ner"].calls == outcome.by_stage["hipporag-triples"].calls == log["chunks"]
    assert log["facts"] > 0 and log["kept"] and log["ranking"] == "ppr"
    assert 0 < len(log["retrieved"]) <= options.top_k
    ner = next(c for c in logged_calls(outcome) if c["stage"] == "hipporag-ner")
    assert ner["request"]["response_schema"] == hipporag.NER_SCHEMA


@pytest.mark.parametrize("corpus", CORPORA)
async def test_linearrag_indexes_without_llm_calls(corpus, fake_server, tmp_path):
    options = linearrag.Options(iteration_threshold=0.05)
    outcome = await run(linearrag.method(options), task(corpus), fake_server, tmp_path, embedding_model="hash-embed")
    check_outcome(outcome, fake_server, {"linearrag-answer"})
    assert outcome.by_stage["linearrag-answer"].calls == 1  # the only chat call: the reader
    log = transcript(outcome)
    assert log["entities"] > 0 and log["sentences"] > 0 and log["vectors"] == "dense" and log["ranking"] == "ppr"
    assert "linearrag-embed" in outcome.by_stage
    assert any(a["tier"] > 1 for a in log["activated"]), log["activated"]


async def test_hipporag_extraction_asks_again_with_the_problem_then_fails_the_passage(tmp_path):
    from r3con.artifacts.folder import RunDir
    from r3con.baselines._common import MethodRun
    from r3con.config import Settings
    from r3con.errors import OutputError
    from r3con.prompts.render import render

    from ..fakes import ScriptedLLM, stack

    replies = iter(['{"named_entities": "Dracula"}', '{"named_entities": ["Dracula"]}', "no JSON", "still none"])
    llm = ScriptedLLM(default=lambda request: next(replies))
    mr = MethodRun("hipporag", "q", Settings.resolve(env={}), stack(llm), RunDir.create(tmp_path, "q"))
    prompt = render("hipporag_ner", title="t", text="Count Dracula")
    assert await hipporag._ask_json(mr, "hipporag-ner", prompt, hipporag.NER_SCHEMA, 100) == {"named_entities": ["Dracula"]}
    retry = llm.history[1].messages
    assert retry[-1].role == "user" and "'Dracula' is not of type 'array'" in retry[-1].content
    with pytest.raises(OutputError, match="hipporag-ner: the reply holds no JSON object .* after 2 attempts"):
        await hipporag._ask_json(mr, "hipporag-ner", prompt, hipporag.NER_SCHEMA, 100)


def test_pagerank_without_igraph_says_which_extra_to_install(monkeypatch):
    import sys

    from r3con.errors import ConfigError

    monkeypatch.setitem(sys.modules, "igraph", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r"need igraph for PageRank: pip install 'r3con\[graph\]'"):
        personalized_pagerank(2, [(0, 1)], [1.0], [1.0, 0.0], 0.5)
