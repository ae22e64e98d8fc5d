"""The linear split gives the parts the earlier (quadratic) split gave, on every kind of text."""

import random

import pytest

from r3con.corpus.documents import EVEN, cut_point, split_text
from r3con.tokens import estimate_tokens, longest_prefix_within


def reference_split(text: str, max_tokens: int) -> list[str]:
    """The split as r3con had it before it was made linear: the remainder re-estimated and re-sliced each cut."""
    if estimate_tokens(text) <= max_tokens:
        return [text]
    pieces, rest = [], text
    while rest and estimate_tokens(rest) > max_tokens:
        cut = cut_point(rest, longest_prefix_within(rest, max_tokens), EVEN)
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        pieces.append(rest)
    return pieces


def reference_prefix(text: str, max_tokens: int) -> int:
    """Largest n with estimate_tokens(text[:n]) <= max_tokens, by counting every prefix's tokens."""
    return max(n for n in range(len(text) + 1) if estimate_tokens(text[:n]) <= max_tokens)


WORDS = ["Ann", "wrote", "to", "Bob", "in", "Oslo", "Müller", "Café", "東京", "に", "住む", "한국어", "x" * 40]


def random_text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    while sum(map(len, out)) < chars:
        word = rng.choice(WORDS)
        out.append(word + rng.choice([" ", " ", " ", ". ", "! ", "。", "\n\n", "\n", "  \n \n", ""]))
    return "".join(out)


@pytest.mark.parametrize("seed", range(12))
def test_the_linear_split_cuts_where_the_quadratic_one_did(seed):
    rng = random.Random(seed)
    budget = rng.choice([1, 7, 50, 256, 1000, 4000])
    text = random_text(rng, rng.randint(500, 3_000 if budget < 50 else 30_000))
    assert split_text(text, budget) == reference_split(text, budget)


@pytest.mark.parametrize("seed", range(6))
def test_the_longest_prefix_is_the_one_counting_every_prefix_finds(seed):
    rng = random.Random(100 + seed)
    text = random_text(rng, 600)
    budget = rng.randint(1, 200)
    assert longest_prefix_within(text, budget) == reference_prefix(text, budget)


def test_a_text_without_any_break_and_one_of_only_cjk_split_as_before():
    for text in ("a" * 50_000, "東" * 20_000, "\n" * 30_000, " " * 30_000):
        assert split_text(text, 300) == reference_split(text, 300)
