"""The same question over a changed corpus: what a run may take from the earlier runs of that question.

Every run records, in a SQLite file beside the LLM cache (`llm.reuse.sqlite`: both say what earlier
calls gave, and `--no-cache` turns both off), per question (the task and the settings whose role is "request" or "question", `config.ROLES`): each answered call's request digest and where the LLM cache holds its reply (a reply is stored once, in the cache), and
per document part (by content: title and text) each round's note, the notes its read was shown in
full (one digest of them: `shown_digest`), and its records; and the schema. The next run of that question reads them:

- `exact`: a call whose request is byte for byte one the earlier runs sent gets the reply they got,
  without a call (`llm.layers.answered.Answered`, from the LLM cache: it counts as a cache hit); every
  other call is made. With a deterministic endpoint (what the LLM
  cache assumes too) the run's notes, records and answer are a fresh run's. A read's request is the
  document, the task and the notes it is shown, so a later-round read repeats exactly when its notes
  selection changed; with every note shown, that is whenever any note changed.
- `approximate`: as `exact`, and further a later-round read is skipped (its earlier note kept) unless a
  new or changed note ranks among the `TOP` notes that rank first for it (the notes selection's
  ranking, whether or not every note fits), or a note that ranked there, or one its note names, left
  the corpus; a document is populated again only when its final note changed (or it is new); the
  schema is kept unless a new one is asked for. The answer is always rebuilt.

Documents are known by content here (`content_key`); what requests call them, their numbers, comes
from their names (`corpus.document_numbers`), so adding or deleting documents changes no other
document's requests.
- `off`: nothing is read; the run is still recorded.

`Decisions` says per document part and stage what was reused or recomputed and why (reuse.json).
"""

from __future__ import annotations

from ._decisions import Decisions, Tops
from ._keys import (
           TOP,
           Contents,
           NoteIds,
           Tables,
           content_digest,
           content_key,
           note_digest,
           question_key,
           shown_digest,
           task_key,
)
from ._reuse import Reuse
from ._store import Previous, Read, ReuseStore, store_path

__all__ = ["TOP", "Contents", "Decisions", "NoteIds", "Previous", "Read", "Reuse", "ReuseStore", "Tables", "Tops",
           "content_digest", "content_key", "note_digest", "question_key", "shown_digest", "store_path", "task_key"]
