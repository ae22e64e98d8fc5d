"""The assumptions a sample is consistent with: a share known when the corpus was read whole, ranges that hold."""

import random

from r3con.pipeline.estimate._draws import Spread, draw, interval


def spread(strata: list[tuple[int, int, int]], sizes: tuple[int, ...] = (100, 60, 140)) -> Spread:
    noted = sum(x for *_, x in strata)
    return Spread(strata=tuple(strata), note_tokens=(sizes * noted)[:noted], growth=(10, 20),
                  first_noted=min(2, noted), last_noted=min(2, noted), populated=4, populate_calls=4, note_cap=1024)


def test_a_corpus_sampled_whole_has_a_known_share():
    rng = random.Random(1)
    whole = spread([(4, 4, 1), (3, 3, 2), (3, 3, 0)])
    shares = {draw(whole, 150, 0, 4, rng)["relevant_share"] for _ in range(50)}
    assert shares == {0.3}


def test_the_drawn_share_holds_the_true_share_as_often_as_stated():
    # populations of 60 parts, each relevant with probability p; one part probed in each of 6 stretches
    rng, held = random.Random(7), 0
    trials = 100
    for trial in range(trials):
        p = [0.05, 0.2, 0.4, 0.6][trial % 4]
        relevant = [rng.random() < p for _ in range(60)]
        strata = [(10, 1, int(relevant[10 * j + rng.randrange(10)])) for j in range(6)]
        shares = [draw(spread(strata), 150, 0, 4, rng)["relevant_share"] for _ in range(200)]
        span = interval(shares, sum(relevant) / 60, 0.9)
        ordered = sorted(shares)
        held += ordered[10] <= sum(relevant) / 60 <= ordered[189]
        assert span.low <= span.expected <= span.high
    assert held / trials >= 0.85


def test_notes_the_sample_never_saw_are_bounded_by_the_notes_cap():
    rng = random.Random(3)
    nothing = spread([(50, 2, 0)] * 4)
    notes = [draw(nothing, 150, 0, 4, rng)["note_tokens"] for _ in range(300)]
    assert max(notes) <= 1024 and min(notes) >= 1 and len(set(notes)) > 50, "no note sampled: a wide spread"


def test_the_agents_steps_and_reasks_are_drawn_within_their_bounds():
    rng = random.Random(5)
    drawn = [draw(spread([(10, 2, 1)] * 4), 150, 0, 6, rng) for _ in range(400)]
    assert {a["agent_steps"] for a in drawn} == set(range(1, 8)), "1 to max_steps, or the last plain answer"
    assert all(a["populate_calls"] >= 1.0 for a in drawn) and max(a["populate_calls"] for a in drawn) > 1.05


def test_an_interval_holds_its_expected_figure():
    values = [float(v) for v in range(100)]
    assert interval(values, 50, 0.9) == interval(values, 50, 0.9)
    span = interval(values, 50, 0.8)
    assert (span.low, span.high, span.median) == (9, 90, 49.5)
    assert interval(values, 120, 0.9).high == 120
