"""Relevance drawn independently of the words: the share and arrangement asked for, whatever the prompt says."""

import json
import urllib.request

from r3con.testing import Behaviour, DrawnRelevance, FakeLLMServer

KEYS = [str(i) for i in range(1, 101)]
TEXT = "The harbour was quiet. Ships came in at dawn. A clerk wrote the names down. Rain fell on the quay."


def relevance(server, key: str, task: str, round_no: int = 1) -> str:
    doc, _, part = key.partition(".")
    prompt = f"<document number=\"{key}\" title=\"T\">\n{TEXT}\n</document>\n\n<task>\n{task}\n</task>\nWrite a note."
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
    headers = {"X-R3con-Stage": "relevance", "X-R3con-Doc": doc, "X-R3con-Round": str(round_no),
               **({"X-R3con-Part": part} if part else {})}
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())["choices"][0]["message"]["content"]


def test_a_draw_has_the_share_asked_for_scattered_or_in_clusters_along_the_order_given():
    scattered = DrawnRelevance.draw(KEYS, 0.2, seed=3)
    assert len(scattered.relevant) == 20 and scattered == DrawnRelevance.draw(KEYS, 0.2, seed=3)
    assert scattered != DrawnRelevance.draw(KEYS, 0.2, seed=4)
    positions = sorted(KEYS.index(k) for k in scattered.relevant)
    assert positions[-1] - positions[0] > 40, "scattered over the order"
    clustered = DrawnRelevance.draw(KEYS, 0.2, seed=3, clusters=1)
    run = sorted(KEYS.index(k) for k in clustered.relevant)
    assert run == list(range(run[0], run[0] + 20)), "one run of neighbours"
    three = sorted(KEYS.index(k) for k in DrawnRelevance.draw(KEYS, 0.3, seed=5, clusters=3).relevant)
    breaks = sum(1 for a, b in zip(three, three[1:], strict=False) if b != a + 1)
    assert len(three) == 30 and breaks <= 2
    assert len(DrawnRelevance.draw(KEYS, 0.001, seed=1).relevant) == 1, "at least one relevant part"


def test_the_server_answers_by_the_draw_whatever_the_task_says():
    drawn = DrawnRelevance(frozenset({"2", "3.2"}), seed=1, drop=1.0)
    with FakeLLMServer(behaviour=Behaviour(relevance=drawn)) as server:
        for task in ("Which ships came in?", "What is the price of tea in China?"):  # overlap, and none
            assert relevance(server, "1", task) == "NONE"
            note = relevance(server, "2", task)
            assert note != "NONE" and note in TEXT, "a run of the part's own sentences"
            assert relevance(server, "3.2", task) == note, "the same note: the same seed, the same text"
            assert relevance(server, "3.1", task) == "NONE", "a part is known by its document and part"
        assert relevance(server, "2", "Which ships came in?", round_no=2) == "NONE", "dropped in a later round"


def test_without_drop_a_note_stays_in_the_later_rounds():
    with FakeLLMServer(behaviour=Behaviour(relevance=DrawnRelevance(frozenset({"5"}), seed=2))) as server:
        first = relevance(server, "5", "anything")
        assert relevance(server, "5", "anything", round_no=2).startswith(first)
