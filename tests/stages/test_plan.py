from r3con import documents_from_texts
from r3con.stages.messages import SHARED_OVERHEAD
from r3con.stages.plan import (
    MIN_PROBES,
    NOTE_TOKENS,
    PROBES,
    CacheSeen,
    Placement,
    Seen,
    Shared,
    expected_shared,
    plan_populate,
    plan_round,
)


def corpus(short: int, long: int):
    """`short` documents shorter than NOTES, then `long` ones longer, numbered in that order."""
    return documents_from_texts([(f"Tin {i}", "Tin.") for i in range(1, short + 1)]
                                + [(f"Doc {i}", f"Doc {i} says the shared matter was settled. " * 60)
                                   for i in range(1, long + 1)])


LONG = corpus(0, 40)
SHORT = corpus(40, 0)
NOTES = Shared(tokens=300)  # longer than a short document, shorter than a long one


def found(plan, share: float, reported: bool = True) -> CacheSeen:
    """What the replies say when `share` of the round's probes found their document in the cache."""
    hits = round(share * len(plan.probes))
    seen = [Seen(900 if i < hits else 10, 1000, 0.9, probe=True) for i in range(len(plan.probes))]
    if not reported:
        seen = [Seen(0, 1000, 0.9, probe=True) for _ in plan.probes]
    return plan.recorded(plan.begin(CacheSeen()).seen(seen))


def doc_first(calls) -> list[bool]:
    return [not c.shared_first for c in calls]


def test_stages_alternate_directions_unless_turned_off():
    docs = LONG[:3]
    assert [d.number for d in Placement().order(docs, reverse=True)] == [3, 2, 1]
    assert [d.number for d in Placement().order(docs, reverse=False)] == [1, 2, 3]
    assert [d.number for d in Placement(alternate=False).order(docs, reverse=True)] == [1, 2, 3]
    assert [c.doc.number for c in plan_round(Placement(), 2, docs, [NOTES] * 3).calls] == [3, 2, 1]


def test_a_shared_part_longer_than_the_document_goes_first_in_the_cache_layout_only():
    long, short = LONG[0], SHORT[0]
    assert not Placement().call(long, NOTES).shared_first
    assert Placement().call(short, NOTES).shared_first
    assert not Placement().call(short, Shared(300, common=False)).shared_first, "a call's own selection stays after"
    assert Placement().call(long, NOTES, cold=True).shared_first, "a document the cache lost: the shared part leads"
    assert not Placement(layout="paper").call(short, NOTES, cold=True).shared_first, "paper places by itself"
    assert not Placement(shared_first=False).call(short, NOTES, cold=True).shared_first
    assert not Placement().call(short, NOTES, probe=True, cold=True).shared_first, "a probe keeps its document first"


def test_round_one_has_no_probes_and_every_document_first():
    plan = plan_round(Placement(), 1, LONG)
    assert plan.probes == () and all(doc_first(plan.calls)) and len(plan.calls) == len(LONG)


def test_probes_are_a_few_calls_spread_over_the_round_that_keep_their_document_first_anyway():
    docs = corpus(10, 30)
    plan = plan_round(Placement(), 2, docs, [NOTES] * len(docs))
    probed = [c.doc for c in plan.probes]
    assert len(probed) == PROBES and all(d.title.startswith("Doc") for d in probed), "only long documents probe"
    positions = [plan.order.index(d) for d in probed]
    eligible = [i for i, d in enumerate(plan.order) if d.title.startswith("Doc")]
    assert min(positions) < eligible[len(eligible) // 4] and max(positions) > eligible[3 * len(eligible) // 4]
    assert all(doc_first(plan.probes))
    assert len(plan.calls) == len(docs) and {c.doc.key for c in plan.calls} == {d.key for d in docs}


def test_no_probes_when_too_few_calls_could_probe_or_under_batch_or_paper():
    docs = corpus(20, MIN_PROBES - 1)
    assert plan_round(Placement(), 2, docs, [NOTES] * len(docs)).probes == ()
    for placement in (Placement(probes=False), Placement(layout="paper")):
        assert plan_round(placement, 2, LONG, [NOTES] * len(LONG)).probes == ()


def test_the_share_of_probes_that_found_their_document_sets_how_many_calls_keep_it_first():
    plan = plan_round(Placement(), 2, LONG, [NOTES] * len(LONG))
    kept = {}
    for share in (0.25, 0.5):
        seen = found(plan, share)
        rest = plan.rest(seen)
        first = [c.doc for c in rest if not c.shared_first]
        kept[share] = len(first) + len(plan.probes)
        order = [d.key for d in plan.order]
        assert max(order.index(d.key) for d in first) < min(order.index(c.doc.key) for c in rest if c.shared_first), \
            "the calls early in the order (sent after the last stage's latest) keep their document first"
        assert seen.cold(), "population will put its shared part first"
        assert seen.rounds[-1].document_first <= len(LONG) * share + 1
    assert kept[0.25] < kept[0.5] < len(LONG)


def test_when_most_probes_found_their_document_or_the_replies_tell_nothing_nothing_changes():
    plan = plan_round(Placement(), 2, LONG, [NOTES] * len(LONG))
    for seen in (found(plan, 1.0), found(plan, 0.75), found(plan, 0.0, reported=False), CacheSeen()):
        assert all(doc_first(plan.rest(seen))) and not seen.cold()
    off = plan_round(Placement(adaptive=False), 2, LONG, [NOTES] * len(LONG))
    seen = found(off, 0.0)
    assert all(doc_first(off.rest(seen))) and not seen.cold(adaptive=False)


def test_calls_that_are_not_probes_only_show_that_cached_tokens_are_reported():
    seen = CacheSeen().seen([Seen(5, 1000, 0.9)] * 10)
    assert seen.reported and seen.probes == 0 and seen.kept_share() == 1.0


def test_population_puts_its_shared_part_first_everywhere_once_the_probes_found_the_cache_cold():
    plan = plan_round(Placement(), 2, LONG, [NOTES] * len(LONG))
    assert all(doc_first(plan_populate(Placement(), LONG, NOTES, found(plan, 1.0), reverse=True)))
    cold = plan_populate(Placement(), LONG, NOTES, found(plan, 0.0), reverse=True)
    assert not any(doc_first(cold)) and [c.doc.number for c in cold] == list(range(40, 0, -1))
    assert not any(doc_first(plan_populate(Placement(), SHORT, NOTES, CacheSeen(), reverse=False))), \
        "short documents: the shared task, schema and notes lead"


def test_replies_are_read_for_the_cache_only_where_placement_uses_them():
    doc = LONG[0]
    call = Placement().call(doc, NOTES, probe=True)
    assert Placement().seen(call, 900, 1000, 50).probe
    for placement in (Placement(probes=False), Placement(layout="paper")):
        seen = placement.seen(placement.call(doc, NOTES, probe=True), 900, 1000, 50)
        assert not CacheSeen().seen([seen]).reported, "under --batch or the paper layout nothing is read"


def test_the_instructions_say_where_the_document_is():
    short, long = SHORT[0], LONG[0]
    assert Placement().call(long, NOTES).where == "above" and Placement().call(short, NOTES).where == "below"
    assert Placement(layout="paper").call(long, NOTES).where == "below"
    assert Placement().call(short, NOTES).prefix_order, "every note, leading: in prefix order"
    assert Placement().call(short, Shared(300, selected=True)).prefix_order, "a selection leading: in prefix order too"
    assert not Placement().call(LONG[0], NOTES).prefix_order, "notes after the document: as chosen"


def test_documents_outweighed_by_the_notes_they_will_be_shown_lead_every_call_with_the_shared_part():
    docs = corpus(3, 3)
    expected = expected_shared(len(docs), None, 10)
    assert expected.tokens == (len(docs) - 1) * NOTE_TOKENS + 10 + SHARED_OVERHEAD and not expected.selected
    first = plan_round(Placement(), 1, docs, expected=expected)
    assert [c.shared_first for c in first.calls] == [True, True, True, False, False, False], \
        "round 1: the instructions lead the short documents, the long ones (not outweighed 4 times) lead their calls"
    assert doc_first(plan_round(Placement(), 1, docs).calls) == [True] * 6, "nothing expected: documents lead"
    selected = [Shared(300, common=False, selected=True)] * len(docs)
    second = plan_round(Placement(), 2, docs, selected, expected)
    assert {c.doc.number: c.shared_first for c in second.calls} == {1: True, 2: True, 3: True, 4: False, 5: False,
                                                                    6: False}, \
        "round 2: a short document's call leads with its notes, even a selection of its own (not cached anyway)"
    assert not any(c.shared_first for c in plan_round(Placement(layout="paper"), 1, docs, expected=expected).calls)
    budgeted = expected_shared(len(docs), 300, 10)
    assert budgeted.selected and budgeted.tokens == 300 + 10 + SHARED_OVERHEAD
    assert doc_first(plan_round(Placement(), 1, docs, expected=budgeted).calls) == [True] * 6, \
        "notes expected over the budget: selections shared with no neighbour; the documents lead, cached for later"


def test_probes_are_never_documents_whose_calls_lead_with_the_shared_part():
    docs = corpus(4, 8)
    plan = plan_round(Placement(), 2, docs, [Shared(100)] * len(docs), expected_shared(len(docs), None, 0))
    assert plan.lead == frozenset(d.key for d in docs[:4])
    assert plan.probes and all(c.doc.title.startswith("Doc") for c in plan.probes)
