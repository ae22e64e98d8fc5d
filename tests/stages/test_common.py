"""Layout helpers shared by the stages: call order, shared-first placement, observed document reuse."""

from r3con.corpus import documents_from_texts
from r3con.llm.types import Usage
from r3con.stages._common import DocumentReuse, call_order, shared_goes_first

DOCS = documents_from_texts([("A", "alpha " * 50), ("B", "beta " * 50), ("C", "gamma " * 50)])


def test_call_order_goes_backwards_only_when_asked():
    assert [d.number for d in call_order(DOCS, reverse=False)] == [1, 2, 3]
    assert [d.number for d in call_order(DOCS, reverse=True)] == [3, 2, 1]


def test_the_shared_part_goes_first_when_longer_than_the_document_or_when_documents_are_not_kept():
    doc = DOCS[0]
    assert not shared_goes_first("cache", doc.tokens - 1, doc)
    assert shared_goes_first("cache", doc.tokens + 1, doc)
    assert shared_goes_first("cache", 10, doc, cold=True)
    assert not shared_goes_first("cache", 10, doc, enabled=False, cold=True)
    assert not shared_goes_first("paper", 10_000, doc, cold=True), "the paper layout places by itself"


def test_probes_are_spread_over_the_calls_that_keep_their_document_first():
    reuse = DocumentReuse()
    assert reuse.probe_positions(range(80)) == [5, 15, 25, 35, 45, 55, 65, 75]
    assert reuse.probe_positions([2, 3, 7, 11, 40, 41, 42, 43, 44, 90]) == [2, 3, 11, 40, 41, 42, 44, 90]
    assert reuse.probe_positions([0, 1, 2, 3]) == [0, 1, 2, 3]
    assert reuse.probe_positions([4, 9, 12]) == [], "too few to judge by: no probes, nothing changes"
    assert reuse.kept_share() == 1.0


def probe(reuse: DocumentReuse, hits: int, misses: int, prompt: int = 1000, share: float = 0.8) -> None:
    reuse.probe_positions(range(100))
    for cached in [700] * hits + [64] * misses:  # 700 of 800 estimated prefix tokens: a hit within the margin
        reuse.observe(Usage(calls=1, prompt_tokens=prompt, cached_tokens=cached), share, probe=True)


def test_the_share_of_probes_that_found_their_document_sets_how_many_calls_keep_it_first():
    reuse = DocumentReuse()
    probe(reuse, hits=2, misses=6)
    assert reuse.kept_share() == 0.25 and reuse.kept_positions(200) == 50 and reuse.cold()
    probe(reuse, hits=8, misses=0)  # a new round starts counting afresh
    assert reuse.kept_positions(200) == 200 and not reuse.cold()
    assert reuse.to_dict()["rounds"] == [{"probes": 8, "kept": 2, "document_first": 50, "calls": 200},
                                         {"probes": 8, "kept": 8, "document_first": 200, "calls": 200}]


def test_an_endpoint_that_reports_no_cached_tokens_tells_nothing():
    reuse = DocumentReuse()
    reuse.probe_positions(range(100))
    for _ in range(8):
        reuse.observe(Usage(calls=1, prompt_tokens=1000, cached_tokens=0), 0.8, probe=True)
    assert not reuse.reported and reuse.kept_positions(100) == 100 and not reuse.cold()


def test_too_few_probes_tell_nothing():
    reuse = DocumentReuse()
    probe(reuse, hits=0, misses=3)
    assert reuse.reported and reuse.kept_share() == 1.0 and not reuse.cold()


def test_calls_that_are_not_probes_only_show_that_cached_tokens_are_reported():
    reuse = DocumentReuse()
    reuse.observe(Usage(calls=1, prompt_tokens=1000, cached_tokens=30), 0.8, probe=False)
    assert reuse.reported and reuse.probes == 0


def test_when_most_probes_found_their_document_nothing_changes():
    reuse = DocumentReuse()
    probe(reuse, hits=6, misses=2)
    assert reuse.kept_positions(200) == 200 and not reuse.cold()
