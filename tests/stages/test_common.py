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


def reread(reuse: DocumentReuse, n: int, cached: int, prompt: int = 1000, share: float = 0.8) -> None:
    for _ in range(n):
        reuse.observe(Usage(calls=1, prompt_tokens=prompt, cached_tokens=cached), share, reread=True)


def test_documents_missing_from_the_cache_on_a_second_reading_make_it_cold():
    reuse = DocumentReuse()
    reread(reuse, 7, cached=64)  # the system message only
    assert not reuse.cold(), "too few calls to judge"
    reread(reuse, 1, cached=64)
    assert reuse.cold() and reuse.to_dict() == {"checked_calls": 8, "document_served_from_cache": 0,
                                                "endpoint_reports_cached_tokens": True, "cold": True}


def test_documents_served_from_the_cache_keep_the_document_first():
    reuse = DocumentReuse()
    reread(reuse, 6, cached=700)  # 700 of the 800 estimated prefix tokens: a hit within the margin
    reread(reuse, 4, cached=64)
    assert reuse.hits == 6 and not reuse.cold()


def test_an_endpoint_that_reports_no_cached_tokens_tells_nothing():
    reuse = DocumentReuse()
    reread(reuse, 50, cached=0)
    assert not reuse.reported and not reuse.cold()


def test_first_readings_count_as_evidence_of_reporting_but_not_as_checks():
    reuse = DocumentReuse()
    reuse.observe(Usage(calls=1, prompt_tokens=1000, cached_tokens=30), 0.8, reread=False)
    assert reuse.reported and reuse.checked == 0
