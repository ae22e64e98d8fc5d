"""A run's parts by place (`corpus.places`): one dict of places for the run, numbers per part in arrays beside it."""

import pickle

import pytest

from r3con.corpus.documents import Document, split_documents
from r3con.corpus.places import Parts, PerPart, places_of


def _parts() -> Parts:
    docs = [Document(number=n, title=f"T{n}", text=f"Person {n}. " * (40 if n == 7 else 1)) for n in (9, 7, 3)]
    return Parts(split_documents(docs, 60))


def test_the_parts_are_the_tuple_of_them_and_know_each_keys_place_once():
    parts = _parts()
    assert isinstance(parts, tuple) and parts == tuple(parts) and len(parts) > 3, "document 7 is split"
    assert list(parts.places) == [p.key for p in parts] and [parts.places[p.key] for p in parts] == list(range(len(parts)))
    assert parts.places is parts.places and places_of(parts) is parts.places, "made once, shared"
    plain = tuple(parts)
    assert places_of(plain) == parts.places and places_of(plain) is not places_of(plain), "a plain tuple's, made anew"
    assert pickle.loads(pickle.dumps(parts)) == parts


def test_a_number_per_part_is_held_in_the_parts_order_and_says_what_it_lacks():
    parts = _parts()
    counts = PerPart(parts.places)
    last, first = parts[-1].key, parts[0].key
    counts[last] = 4
    counts[first] = 0
    counts["elsewhere"] = 2  # a key the parts lack: after them
    counts[last] = 5  # set again: replaced, not counted twice
    assert list(counts) == [first, last, "elsewhere"] and len(counts) == 3
    assert dict(counts) == {first: 0, last: 5, "elsewhere": 2} and counts.get(parts[1].key) is None
    assert parts[1].key not in counts and 3 not in counts and "elsewhere" in counts and "elsewhere" not in parts.places
    with pytest.raises(KeyError):
        counts[parts[1].key]
    with pytest.raises(ValueError, match="0 or more"):
        counts[first] = -1
    del counts[last]
    assert list(counts) == [first, "elsewhere"] and len(counts) == 2 and counts.pop(first) == 0 and len(counts) == 1
    with pytest.raises(KeyError):
        del counts[last]
