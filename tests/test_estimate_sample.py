"""What a sample decides to read, and where a sampled estimate puts what it measured."""

import r3con
from r3con.pipeline.estimate import Assumptions, estimate_run
from r3con.pipeline.estimate._sample import MEAN_ERROR, _top, _wanted

TASK = "Which ships sailed from Varna?"


def test_notes_of_one_length_need_no_more_probes_and_notes_of_any_length_need_more():
    alike = {i: "a note of about this length" for i in range(0, 80, 10)}
    assert _wanted(alike, 8) == 0
    ragged = {i: "word " * size for i, size in enumerate((1, 3, 40, 2, 90, 5, 1, 300))}
    assert _wanted(ragged, 8) == 8  # the cap: their mean would need far more
    assert 0 < _wanted(ragged, 10_000) < 10_000
    sizes = [len(n) for n in ragged.values()]
    mean = sum(sizes) / len(sizes)
    cv = (sum((s - mean) ** 2 for s in sizes) / (len(sizes) - 1)) ** 0.5 / mean
    assert len(sizes) + _wanted(ragged, 10_000) >= (cv / MEAN_ERROR) ** 2  # enough for the stated error


def test_the_best_ranked_part_is_read_when_the_best_probe_got_a_note():
    assert _top({4: "it says so", 12: ""}) == [0]
    assert _top({4: "", 12: "it says so"}) == []  # relevance does not follow the ranking's top: nothing to impute
    assert _top({0: "it says so", 12: ""}) == []  # read already


async def test_a_sampled_estimate_puts_the_notes_on_the_parts_the_sample_saw_them_on():
    # long parts hold the records; the sample saw the long ones get the notes
    texts = [(f"Log {i}", ("The Demeter sailed from Varna with fifty boxes of earth. " * (60 if i % 2 == 0 else 2)))
             for i in range(10)]
    docs = r3con.documents_from_texts(texts)
    settings = r3con.Settings.resolve(env={}, model="gpt-4o-mini", rounds=1)
    base = Assumptions(relevant_share=0.5, records_density=(1.0, 0.0))
    spread_evenly = await estimate_run(TASK, docs, settings, assumptions=base, ranged=False)
    placed = await estimate_run(TASK, docs, settings, assumptions=Assumptions(
        relevant_share=0.5, records_density=(1.0, 0.0), note_order=(0, 2, 4, 6, 8, 1, 3, 5, 7, 9)), ranged=False)
    records = [{s.stage: s for s in e.stages}["populate"].output_tokens for e in (spread_evenly, placed)]
    assert records[1] > 10 * records[0]  # the long parts' records, not the short ones'
    odd = Assumptions(relevant_share=0.5, records_density=(1.0, 0.0), note_order=(1, 3, 5, 7, 9, 0, 2, 4, 6, 8))
    short = await estimate_run(TASK, docs, settings, assumptions=odd, ranged=False)
    assert {s.stage: s for s in short.stages}["populate"].output_tokens == records[0]


class _Halves:
    """A tokenizer that counts half of what r3con's own estimate does."""

    source = "halves"

    async def count(self, texts):
        from r3con.tokens import estimate_tokens

        return [estimate_tokens(t) // 2 for t in texts]


async def test_the_notes_budget_is_counted_in_the_endpoints_tokens():
    # the notes are selected by r3con's own estimate of their tokens; an endpoint that counts half of it is shown
    # half as many of its tokens of notes, as of everything else
    docs = r3con.documents_from_texts([(f"Log {i}", "The Demeter sailed from Varna with boxes of earth. " * 20)
                                       for i in range(40)])
    settings = r3con.Settings.resolve(env={}, model="gpt-4o-mini", rounds=2, notes_budget_tokens=600)
    a = Assumptions(note_tokens=150)
    own = await estimate_run(TASK, docs, settings, assumptions=a, ranged=False)
    halved = await estimate_run(TASK, docs, settings, assumptions=a, counter=_Halves(), ranged=False)
    assert any("at most 600 tokens" in line for line in own.assumptions)
    relevance = [{s.stage: s for s in e.stages}["relevance"].input_tokens for e in (own, halved)]
    assert 0.45 <= relevance[1] / relevance[0] <= 0.55
