import json

import pytest

from r3con.baselines import raptor

from ._helpers import CORPORA, check_outcome, logged_calls, run, server_stages, task, transcript

OPTIONS = raptor.Options(chunk_tokens=800, cluster_size=4)


@pytest.mark.parametrize("corpus", CORPORA)
async def test_builds_a_tree_and_answers(corpus, fake_server, tmp_path):
    outcome = await run(raptor.method(OPTIONS), task(corpus), fake_server, tmp_path)
    check_outcome(outcome, fake_server, {"raptor-summarize", "raptor-answer"})
    log = transcript(outcome)
    levels = log["levels"]
    assert len(levels) >= 3 and levels == sorted(levels, reverse=True)  # leaves and at least two summary levels
    assert all(b == -(-a // 4) for a, b in zip(levels, levels[1:], strict=False))  # clusters of at most 4
    assert server_stages(fake_server).count("raptor-summarize") >= sum(levels[1:])  # cut replies are re-asked
    assert log["clustering"] == "reading order"
    tree = json.loads((outcome.run_dir / "tree.json").read_text())
    assert {n["level"] for n in tree["summaries"]} == set(range(1, len(levels)))
    # the tree is built without the task: no summarising prompt contains it
    calls = logged_calls(outcome)
    summaries = [c["request"]["messages"][-1]["content"] for c in calls if c["stage"] == "raptor-summarize"]
    assert all(task(corpus).task_text[:60] not in p for p in summaries)
    assert log["retrieved"]


async def test_with_embeddings_it_clusters_by_similarity(fake_server, tmp_path):
    outcome = await run(raptor.method(OPTIONS), task("dracula"), fake_server, tmp_path, embedding_model="hash-embed")
    check_outcome(outcome, fake_server, {"raptor-summarize", "raptor-answer"})
    log = transcript(outcome)
    assert log["clustering"] == "kmeans" and len(log["levels"]) >= 3
    embed = [c for c in fake_server.calls() if c["path"] == "/v1/embeddings"]
    assert embed and all(c["stage"] == "raptor-embed" for c in embed)
    assert sum(c["inputs"] for c in embed) == sum(log["levels"]) + 1  # every node, and the task
    retrieved_levels = {r["level"] for r in log["retrieved"]}
    assert retrieved_levels  # collapsed tree: nodes of any level may be retrieved


def test_kmeans_clusters_are_bounded_and_cover_every_node():
    vectors = [[1.0, 0.0]] * 5 + [[0.0, 1.0]] * 7
    clusters = raptor.kmeans_clusters(vectors, size=3, iterations=5)
    assert sorted(i for c in clusters for i in c) == list(range(12)) and all(len(c) <= 3 for c in clusters)
    assert all(len({tuple(vectors[i]) for i in c}) == 1 for c in clusters)  # similar nodes together
