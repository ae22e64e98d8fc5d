"""How sure a sampled estimate is: what `estimate --sample N` saw, and the assumptions it could have seen.

`estimate_run` turns one set of assumptions into calls, tokens and cost. A sample pins those
assumptions down only as far as its few documents allow, so the range of an estimate comes from
drawing assumptions the sample is consistent with (`draw`), each turned into a run by the same
`estimate_run`, and reading off the quantiles. What is drawn, and why:

- the share of documents that get a note: the N sampled documents sit one in each of N equal
  stretches of the BM25 ranking, so they are a systematic sample of the corpus whatever the model's
  notion of relevance, and give the corpus-wide share a Beta posterior (Jeffreys prior); the extra
  first-round calls that refine the ranking are placed where relevance changes, so they count only
  within their stretch: each stretch's share is drawn from a Beta on its own calls with and without
  a note and two pseudo-calls at the corpus-wide share, and its parts not called from that share
  (finite population: a stretch read whole is known);
- the share that keeps its note in the last round: Beta on the sampled documents that kept theirs;
- the notes' mean size: Student's t around the sampled notes' mean, with their spread pooled with a
  prior coefficient of variation of 0.8 (two pseudo-notes) so that one or two notes do not claim to
  know the spread; plus the spread of the mean over the relevant documents not sampled, each note
  at most --note-max-tokens; with no note sampled, the assumed size with that spread;
- the notes' growth in the last round: a bootstrap of the sampled documents' growths;
- population re-asks: a Gamma posterior (Jeffreys) on the re-asks seen per sampled document;
- the coding agent's steps: any number from 1 to max_steps + 1 (the last plain answer), equally
  likely, where the sample could not run the agent (`_range._steps` draws around what it took where it did).

The schema's and records' sizes and the endpoint's token scale stay as measured.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from statistics import fmean, stdev
from typing import Any

PRIOR_CV = 0.8  # notes' sizes vary by this share of their mean, until the sample says otherwise
PRIOR_NOTES = 2  # ... as if two notes had shown it
STRATUM_PRIOR = 2.0  # a stretch's share leans on the corpus-wide share as if that were two calls of its own


@dataclass(frozen=True)
class Spread:
    """What the sample saw document by document: what a range is drawn from."""

    strata: tuple[tuple[int, int, int], ...]  # per stretch of the ranking: its parts, first-round calls, notes
    note_tokens: tuple[int, ...]  # the first-round notes' sizes (endpoint tokens)
    growth: tuple[int, ...]  # per sampled document with a note in the first and the last round, what the last added
    first_noted: int  # sampled documents (one a stretch) with a first-round note
    last_noted: int  # of them, those with a note in the last round
    populated: int  # documents whose population calls were made
    populate_calls: int  # the calls they took (re-asks included)
    note_cap: int  # a note's most tokens (the relevance calls' max_tokens)

    @property
    def probes(self) -> int:
        return sum(m for _, m, _ in self.strata)

    @property
    def noted(self) -> int:
        return sum(x for _, _, x in self.strata)

    def doubled(self) -> Spread:
        """The spread a sample twice as large would show if it saw more of the same: each stretch of the
        ranking halved, with as many calls and notes as before."""
        strata = tuple((size, min(m, size), min(x, size)) for n, m, x in self.strata
                       for size in (n // 2, n - n // 2) if size)
        return replace(self, strata=strata, note_tokens=self.note_tokens * 2, growth=self.growth * 2,
                       first_noted=2 * self.first_noted, last_noted=2 * self.last_noted,
                       populated=2 * self.populated, populate_calls=2 * self.populate_calls)


def draw(spread: Spread, note_tokens: int, growth: int, max_steps: int, rng: random.Random) -> dict[str, Any]:
    """One set of assumptions the sample is consistent with, as the `estimate.Assumptions` fields it sets
    (`note_tokens` and `growth`: the first-round notes' size and its growth to the last round, assumed
    where the sample saw no note)."""
    parts = sum(n for n, _, _ in spread.strata)
    noted = _noted(rng, spread)
    kept_share = (rng.betavariate(spread.last_noted + 0.5, spread.first_noted - spread.last_noted + 0.5)
                  if spread.first_noted else 1.0)
    kept = _binomial(rng, noted, kept_share)
    note = _mean_note(rng, spread, noted, note_tokens)
    grown = fmean(rng.choices(spread.growth, k=len(spread.growth))) if spread.growth else growth
    reasks = rng.gammavariate(max(0, spread.populate_calls - spread.populated) + 0.5, 1.0) / max(1, spread.populated)
    drawn: dict[str, Any] = {
        "relevant_share": noted / max(1, parts), "final_relevant_share": kept / max(1, parts),
        "note_tokens": max(1, round(note)), "final_note_tokens": max(1, round(min(spread.note_cap, note + grown))),
        "agent_steps": rng.randint(1, max_steps + 1)}
    if spread.populated:
        drawn["populate_calls"] = 1.0 + reasks
    return drawn


def _noted(rng: random.Random, spread: Spread) -> int:
    """How many parts get a first-round note: in each stretch of the ranking, those its calls found and a
    draw for the rest, at a share drawn around the stretch's own calls and the corpus-wide share (itself
    drawn from the one call a stretch that was not placed by what the others found)."""
    strata = len(spread.strata)
    first = min(strata, spread.first_noted)
    overall = rng.betavariate(first + 0.5, strata - first + 0.5)
    total = 0
    for size, probes, noted in spread.strata:
        share = rng.betavariate(STRATUM_PRIOR * overall + noted, STRATUM_PRIOR * (1 - overall) + probes - noted)
        total += noted + _binomial(rng, max(0, size - probes), share)
    return total


def _mean_note(rng: random.Random, spread: Spread, noted: int, assumed: int) -> float:
    """The mean size of `noted` notes: those sampled, and the others drawn around their mean."""
    sizes = spread.note_tokens
    seen = len(sizes)
    mean = fmean(sizes) if sizes else float(assumed)
    prior = (PRIOR_CV * mean) ** 2
    pooled = PRIOR_NOTES * prior + ((seen - 1) * stdev(sizes) ** 2 if seen > 1 else 0.0)
    freedom = PRIOR_NOTES + max(0, seen - 1)
    spread_sd = math.sqrt(pooled / freedom)
    t = rng.gauss(0.0, 1.0) / math.sqrt(rng.gammavariate(freedom / 2, 2.0) / freedom)
    centre = mean + t * spread_sd / math.sqrt(max(1, seen))
    unseen = max(0, noted - seen)
    if not unseen:
        return mean
    others = centre + rng.gauss(0.0, spread_sd / math.sqrt(unseen))
    others = min(float(spread.note_cap), max(1.0, others))
    return (sum(sizes) + unseen * others) / (seen + unseen)


def _binomial(rng: random.Random, n: int, p: float) -> int:
    """A Binomial(n, p) draw (normal approximation past 1,000 trials)."""
    if n <= 1000:
        return sum(1 for _ in range(n) if rng.random() < p)
    return max(0, min(n, round(rng.gauss(n * p, math.sqrt(n * p * (1 - p))))))


@dataclass(frozen=True)
class Interval:
    """Low, expected and high figures of one quantity."""

    low: float
    expected: float
    high: float
    median: float  # the draws' median

    def to_dict(self, digits: int = 0) -> dict[str, Any]:
        def r(x: float) -> float | int:
            return round(x, digits) if digits else round(x)

        return {"low": r(self.low), "expected": r(self.expected), "high": r(self.high), "median": r(self.median)}

    def half_width(self) -> float:
        """Half the range as a share of the expected figure."""
        return (self.high - self.low) / 2 / self.expected if self.expected else 0.0


def interval(values: list[float], expected: float, confidence: float) -> Interval:
    """The central `confidence` of `values` (the draws at or just outside its bounds, so that a figure
    that comes in whole numbers, as calls do, is not cut between two draws), widened to hold
    `expected` if it falls outside."""
    ordered = sorted(values)
    last = len(ordered) - 1
    low = ordered[math.floor((1 - confidence) / 2 * last)]
    high = ordered[math.ceil((1 + confidence) / 2 * last)]
    return Interval(min(low, expected), expected, max(high, expected), ordered[last // 2] if last % 2 == 0
                    else (ordered[last // 2] + ordered[last // 2 + 1]) / 2)
