"""How the reuse record knows a question, a document part, a note and a record's part, whatever the corpus
calls them now."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ...config import Settings
from ...corpus.documents import Document
from ...corpus.places import places_of

Tables = Mapping[str, list[dict[str, Any]]]  # a document's records per table


def _part_key(record: Mapping[str, Any]) -> str:
    """The key of the document part a record was populated from ('12', '12.2')."""
    return f"{record['_doc']}.{record['_part']}" if "_part" in record else str(record["_doc"])


def content_key(doc: Document) -> str:
    """A document part as its reads see it: its title and text (its number may change with the corpus); the
    text by its hash, which the corpus store keeps, so that a large corpus is not hashed again. 20 hex digits."""
    return content_digest(doc).hex()


def content_digest(doc: Document) -> bytes:
    """`content_key` as the 10 bytes it spells."""
    return hashlib.sha256(f"{doc.title}\x00{doc.part}\x00{doc.sha256}".encode("utf-8", "surrogatepass")).digest()[:10]


class Contents(Mapping[str, str]):
    """Each part's `content_key` by its key, in the parts' order: its digest's bytes in one bytes object beside
    the parts' places, not a string a part and a dict entry held for the whole run."""

    WIDTH = 10

    def __init__(self, parts: Sequence[Document]):
        self._at = places_of(parts)  # the run's one dict of them, for `Parts`
        self._digests = b"".join(map(content_digest, parts))

    def __getitem__(self, key: str) -> str:
        at = self._at[key] * self.WIDTH
        return self._digests[at:at + self.WIDTH].hex()

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)


class NoteIds:
    """What a call was shown of `notes` (each part's note), as the reuse record keeps it: `shown_digest` of the
    notes' (`content_key`, `note_digest`) pairs. A note is shown to many calls: its pair's digest is made once,
    the first time, and kept as its bytes at its part's place (beside `Contents`'s); a call's digest is then a sum
    of a few hundred numbers, not a string, a hash and a JSON entry a note it was shown."""

    def __init__(self, content: Contents, notes: Mapping[str, str]):
        self._content, self._notes = content, notes
        slots = len(content._digests) // Contents.WIDTH
        self._pairs = np.zeros((slots, 2), dtype="<u8")
        self._made = bytearray(slots)

    def digest(self, keys: Iterable[str]) -> str:
        """`shown_digest` of the notes of `keys` (parts of the run; a key named twice counts once)."""
        at, made = self._content._at, self._made
        places = []
        for key in keys:
            place = at[key]
            if not made[place]:
                pair = _pair_bytes(self._content[key], _note_bytes(self._notes.get(key, "")))
                self._pairs[place] = np.frombuffer(pair, dtype="<u8")
                made[place] = 1
            places.append(place)
        return _sum_hex(self._pairs[np.unique(np.asarray(places, dtype=np.int64))].sum(axis=0, dtype=np.uint64))


def shown_digest(pairs: Iterable[tuple[str, str]]) -> str:
    """The notes a call was shown, (content, note digest) pairs, as one digest whatever their order: the sum of
    the pairs' own digests (`_pair_bytes`, as two numbers, each summed modulo 2^64). Only compared for equality:
    two runs' calls were shown the same notes, or not."""
    total = np.zeros(2, dtype="<u8")
    for content, note in set(pairs):
        total += np.frombuffer(_pair_bytes(content, bytes.fromhex(note)), dtype="<u8")  # an array's sum wraps
    return _sum_hex(total)


def _pair_bytes(content: str, note: bytes) -> bytes:
    return hashlib.sha256(bytes.fromhex(content) + note).digest()[:16]


def _sum_hex(total: np.ndarray) -> str:
    return total.astype("<u8").tobytes().hex()


def question_key(task: str, settings: Settings) -> str:
    """The question (`task_key`) and the settings that shape its requests and results
    (`Settings.question_settings`: the roles "request" and "question"), as one key."""
    shaping = settings.question_settings()
    return hashlib.sha256(json.dumps([task_key(task), shaping], sort_keys=True, default=str).encode()).hexdigest()[:24]


def task_key(task: str) -> str:
    """The task as a question: case, runs of white space and trailing punctuation do not make another one
    (its requests still hold the task as typed: `exact` finds the earlier run and repeats the calls whose
    text differs, `approximate` keeps its notes)."""
    return " ".join(task.casefold().split()).rstrip(_TRAILING).rstrip()


_TRAILING = "?!.,;: \u3002\uff1f\uff01"


def note_digest(text: str) -> str:
    return _note_bytes(text).hex()


def _note_bytes(text: str) -> bytes:
    """`note_digest` as the 8 bytes it spells."""
    return hashlib.sha256(text.encode()).digest()[:8]


TOP = 3
"""`approximate` reads a later-round read again when a new or changed note ranks among the `TOP` notes
that rank first for it (`NotesChoice.top`: the notes selection's ranking, BM25 or embeddings, with the
task and the part's own last note as the query), whether or not every note fits."""
