"""Relevance drawn at random, independently of the words: which documents the scripted model finds relevant
when its notion of relevance is not word overlap (the server's default) but a seeded draw.

A real model decides relevance by meaning, which a BM25 ranking of the corpus predicts only in part.
`DrawnRelevance` lets the scripted server stand for such a model: the relevant parts are a given set
(usually drawn with `DrawnRelevance.draw`, scattered or in clusters along an order the caller chooses,
such as the BM25 ranking), and a relevant part's note quotes a seeded run of its sentences, so that
notes vary in size as real ones do. Nothing depends on the prompt's wording: a part is known by the
X-R3con-Doc and X-R3con-Part headers.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from . import _text as t
from ._reading import Reading


@dataclass(frozen=True)
class DrawnRelevance:
    """The parts ('3', or '3.2' for part 2 of document 3) that get a note; each of them drops out of the
    later rounds with probability `drop` (the model changing its mind once it sees the other notes);
    a note quotes 1 to `max_sentences` consecutive sentences from a seeded place in the part."""

    relevant: frozenset[str]
    seed: int = 0
    drop: float = 0.0
    max_sentences: int = 6

    @classmethod
    def draw(cls, keys: Sequence[str], share: float, seed: int, *, clusters: int = 0, drop: float = 0.0,
             max_sentences: int = 6) -> DrawnRelevance:
        """`share` of `keys` (rounded, at least one) chosen with `seed`: scattered uniformly over them
        (`clusters` 0), or as `clusters` runs of neighbouring keys at random places in the order given."""
        rng = random.Random(f"drawn:{seed}")
        count = max(1, min(len(keys), round(share * len(keys))))
        if clusters <= 0:
            chosen = set(rng.sample(range(len(keys)), count))
        else:
            sizes = [count // clusters + (1 if i < count % clusters else 0) for i in range(clusters)]
            chosen = set()
            for size in sizes:
                free = [i for i in range(len(keys) - size + 1) if not chosen & set(range(i, i + size))]
                start = rng.choice(free) if free else rng.randrange(len(keys) - size + 1)
                chosen.update(range(start, start + size))
        return cls(frozenset(keys[i] for i in chosen), seed=seed, drop=drop, max_sentences=max_sentences)

    def reply(self, r: Reading, key: str) -> str:
        """The relevance reply to request `r` for part `key`: a note, or NONE."""
        dropped = random.Random(f"drawn:{self.seed}:{key}:drop").random() < self.drop
        kept = key in self.relevant and (r.round < 2 or not dropped)
        said = t.sentences(r.document)
        if not kept or not said:
            return "NONE"
        rng = random.Random(f"drawn:{self.seed}:{key}:note")  # the same note in every round, links aside
        length = rng.randint(1, self.max_sentences)
        start = rng.randrange(len(said))
        note = " ".join(said[start:start + length])
        if r.round >= 2:  # as the default responder: links to the other notes it shares words with
            mine = t.content_words(note)
            links = [f"Related: Document {s.label} ({s.title})" for s in r.notes
                     if len(t.content_words(s.text) & mine) >= 2][:3]
            note = "\n".join([note, *links])
        return note


def part_key(doc: str, part: str) -> str:
    """The key of a request's part from its X-R3con-Doc and X-R3con-Part headers."""
    return f"{doc}.{part}" if part else doc
