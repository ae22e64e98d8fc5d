"""One run's use of its question's earlier runs (`Reuse`): the LLM layer, what the approximate mode keeps,
the decisions, and the record for the next run."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...config import Settings
from ...corpus.documents import Document
from ...corpus.places import Parts, places_of
from ...llm.cache import CallCache
from ...llm.layers.answered import Answered
from ...llm.types import LLM, Completion
from ...notes.selection import Shown, round_entries
from ...notes.shown import ShownLog
from ...stages.populate import PopulateResult
from ._decisions import Decisions
from ._keys import TOP, Contents, NoteIds, Tables, _part_key, note_digest, question_key
from ._store import Previous, ReuseStore, store_path


def _kept(cache: CallCache, where: Callable[[str], str | None], digest: str) -> tuple[Completion, str] | None:
    """An earlier run's reply to the request with `digest`, from the LLM cache, and its key there."""
    key = where(digest)
    if key is None:
        return None
    reply = cache.get(key)
    return (reply, key) if reply is not None else None


class Reuse:
    """One run's use of its question's earlier runs: the LLM layer, the approximate mode's `keep_note`
    and `keep_records`, the decisions per document and stage, and the record for the next run."""

    def __init__(self, mode: str, store: ReuseStore | None, question: str, run_dir: Path,
                 parts: Sequence[Document], *, new_schema: bool = False):
        self.mode, self.store, self.new_schema = mode, store, new_schema
        self.previous = store.previous(question) if store is not None and mode != "off" else Previous()
        self.run = store.begin(question, run_dir) if store is not None else 0
        self.replanned(parts)
        self._reasons: dict[tuple[str, int], str] = {}  # why `keep_note` had a document read again
        self._earlier = {content for _, content in self.previous.reads}
        self._numbers = set(self.previous.sources.values())
        self.decisions = Decisions(mode, self.previous.run_dir, places_of(self.parts))
        self._layer: Answered | None = None
        self._finals_differ: bool | None = None  # `_finals_changed`, once compared

    @classmethod
    def open(cls, mode: str, cache_path: Path | None, task: str, settings: Settings, run_dir: Path,
             parts: Sequence[Document], *, new_schema: bool = False) -> Reuse:
        """The record beside the LLM cache file (`store_path`); with no cache, none: nothing is reused."""
        store = ReuseStore(store_path(cache_path)) if cache_path is not None else None
        return cls(mode, store, question_key(task, settings), run_dir, parts, new_schema=new_schema)

    def replanned(self, parts: Sequence[Document]) -> None:
        """The run's document parts, as first planned or planned again for a window learned mid-run: every
        decision and the record for the next run are of these parts."""
        self.parts = parts if isinstance(parts, Parts) else Parts(parts)  # the places its records share
        self.content = Contents(self.parts)
        self._key_of: dict[str, str] | None = None
        self._final_ids: tuple[Mapping[str, str], NoteIds] | None = None  # `_population_notes`' final notes

    @property
    def key_of(self) -> Mapping[str, str]:
        """Each content present, its part's key: made when an earlier run's reads are compared (a first run
        never asks: a dict entry a document it would hold for nothing)."""
        if self._key_of is None:
            self._key_of = {c: k for k, c in self.content.items()}
        return self._key_of

    @property
    def approximate(self) -> bool:
        return self.mode == "approximate" and self.previous.found

    @property
    def top(self) -> int:
        """How many first-ranked notes each later-round read records and `keep_note` weighs (`TOP`; none
        when nothing is recorded or read)."""
        return TOP if self.store is not None or self.approximate else 0

    @property
    def note_keeper(self) -> Callable[[Document, int, Mapping[str, str] | None], str | None] | None:
        """`keep_note` under `approximate` (for `RelevanceOptions.keep`), else None."""
        return self.keep_note if self.approximate else None

    def records_keeper(self, final: Mapping[str, str]) -> Callable[[Document], Tables | None] | None:
        """`keep_records(final)` under `approximate` with the earlier schema kept (for `PopulateOptions.keep`)."""
        return self.keep_records(final) if self.schema() is not None else None

    def bind(self, llm: LLM, layer: Answered | None) -> LLM:
        """The client the run's stages call: `llm`, whose `layer` (the run's own stack's) now answers the
        earlier runs' identical requests and records every call; without one, `llm` behind a new layer
        (whose replies then do not count as cache hits)."""
        outer = layer is None
        cache = getattr(llm, "cache", None) if layer is None else layer.cache
        layer = Answered(llm) if layer is None else layer
        where, store, run = self.previous.reply, self.store, self.run
        if self.mode != "off" and cache is not None and self.previous.found:  # kept in the LLM cache alone
            layer.earlier = functools.partial(_kept, cache, where)
        layer.record = None if store is None else functools.partial(store.call, run)
        self._layer = layer
        return layer if outer else llm

    def _identities(self, shown: Mapping[str, str]) -> set[tuple[str, str]]:
        """Notes (document key -> text) as reads see them: each document's content and its note's digest."""
        return {(self.content[k], note_digest(text)) for k, text in shown.items()}

    def keep_note(self, doc: Document, round_no: int, top: Mapping[str, str] | None) -> str | None:
        """`--reuse approximate`: the earlier note of `doc` in `round_no`, unless a new or changed note ranks
        among the `TOP` notes that rank first for it (`top`, key -> text; None in round 1), or a note that
        ranked there in the earlier run left the corpus, or a document its note names left or was
        renumbered. Notes that rank lower do not matter to it, shown in full or not."""
        earlier = self.previous.reads.get((round_no, self.content[doc.key]))
        if earlier is None:
            return None
        if top is None:
            return earlier.note
        for content, digest in self._identities(top):
            before = self.previous.reads.get((round_no - 1, content))
            if before is None or note_digest(before.note) != digest:
                return self._reread(doc, round_no, f"a new or changed note ranks among its top {TOP}")
        if any(c not in self.key_of for c in earlier.top):
            return self._reread(doc, round_no, f"a note among its top {TOP} left the corpus")
        if any(self.key_of.get(c) != k for c, k in earlier.refs):
            return self._reread(doc, round_no, "a document its note names left or was renumbered")
        return earlier.note

    def _reread(self, doc: Document, round_no: int, why: str) -> str | None:
        """No note to keep: `doc` is read again in `round_no`, for the reason `why` (reuse.json says it)."""
        self._reasons[(doc.key, round_no)] = why
        return None

    def keep_records(self, final: Mapping[str, str]) -> Callable[[Document], Tables | None]:
        """`--reuse approximate`: for population, the earlier records of a document whose final note is
        unchanged (with the earlier schema kept)."""
        def keep(doc: Document) -> Tables | None:
            earlier = self.previous.records.get(self.content[doc.key])
            if earlier is None or earlier[0] != final.get(doc.key, ""):
                return None
            tables: dict[str, list[dict[str, Any]]] = {}
            for row in earlier[1]:
                tables.setdefault(row["_table"], []).append({k: v for k, v in row.items() if k != "_table"})
            return tables
        return keep

    def schema(self) -> Mapping[str, Any] | None:
        """`--reuse approximate`: the earlier run's schema, unless a new one is asked for."""
        return self.previous.schema if self.approximate and not self.new_schema else None

    def _why_new(self, doc: Document) -> str | None:
        """Why `doc` has no earlier read at all: new, or changed (a document of its number, that is of its
        name, was read before, with other content)."""
        if self.content[doc.key] in self._earlier:
            return None
        return "changed document" if str(doc.number) in self._numbers else "new document"

    def decide_relevance(self, rounds: Sequence[Mapping[str, str]], shown: Sequence[ShownLog],
                         kept: Sequence[frozenset[str]]) -> None:
        """What each read of each round reused, and why it was recomputed otherwise; the reads are written to the
        record at once. What each later-round read was shown (`shown`, per round from the second) is read back
        one read at a time: all of it at once would be most of what a run holds a document."""
        layer = self._layer
        ids = [NoteIds(self.content, notes) for notes in rounds]  # each note's digest made once, not a read
        for r, notes in enumerate(rounds, start=1):
            stage = f"relevance-{r}"
            log = shown[r - 2] if 2 <= r <= len(shown) + 1 else None
            for doc in self.parts:
                if doc.key not in notes:
                    continue
                seen = log.get(doc.key) if log is not None else None
                top = seen.top if seen is not None else ()
                if r - 1 < len(kept) and doc.key in kept[r - 1]:
                    self.decisions.note(doc.key, stage, True, "kept: same document" if r == 1 else
                                        f"kept: no new or changed note among its top {TOP}", top)
                    continue
                where = ("relevance", doc.key, r)
                if layer is not None and layer.replayed[where] and not layer.sent[where]:
                    self.decisions.note(doc.key, stage, True, "same request", top)
                    continue
                why = self._why_new(doc) if self.previous.found else "no earlier run"
                if why is None and (doc.key, r) in self._reasons:
                    why = self._reasons[(doc.key, r)]
                elif why is None:
                    earlier = self.previous.reads.get((r, self.content[doc.key]))
                    full = seen.full if seen is not None else ()
                    if earlier is None:
                        why = "no earlier read in this round"
                    elif r >= 2 and ids[r - 2].digest(full) != earlier.full:
                        why = ("every note is shown, and the notes changed" if seen is not None and
                               seen.why == "every note" else "notes shown changed")
                    else:
                        why = "request changed (placement or notes shown)"
                self.decisions.note(doc.key, stage, False, why, top)
        if self.store is not None:
            self.store.reads(self.run, self._reads(rounds, shown, ids))

    def _reads(self, rounds: Sequence[Mapping[str, str]], shown: Sequence[ShownLog], ids: Sequence[NoteIds]) -> Iterator[
            tuple[int, str, str, str, str, list[tuple[str, str]], list[str]]]:
        """The reads as the record keeps them, one at a time as the store writes them: the notes each read was
        shown in full grow with the corpus times the notes a read is shown, too many to hold at once."""
        content = self.content
        by_key = {p.key: p for p in self.parts}
        for r, notes in enumerate(rounds, start=1):
            log = shown[r - 2] if 2 <= r <= len(shown) + 1 else None
            for entry in round_entries(self.parts, notes):
                key = entry["doc"]
                seen = log.get(key) if log is not None else None
                full = ids[r - 2].digest(seen.full if seen is not None else ())
                named = [(content[k], k) for k in entry["refs"] if k in content]
                top = [content[k] for k in (seen.top if seen is not None else ()) if k in content]
                # the `source` column holds the document's identity, its number (`corpus.document_numbers`)
                yield r, content[key], str(by_key[key].number), entry["note"], full, named, top

    def decide_populate(self, filled: PopulateResult, final: Mapping[str, str], schema: Mapping[str, Any]) -> None:
        """What each document's population reused, and why it was recomputed otherwise; the records of the
        documents populated, and the final notes each was shown (chosen per document), are written to the
        record at once."""
        shown = filled.shown
        layer = self._layer
        for doc in self.parts:
            if doc.key not in filled.per_doc:
                continue
            if doc.key in filled.kept:
                self.decisions.note(doc.key, "populate", True, "kept: final note unchanged")
                continue
            where = ("populate", doc.key, None)
            if layer is not None and layer.replayed[where] and not layer.sent[where]:
                self.decisions.note(doc.key, "populate", True, "same request")
                continue
            why = self._why_new(doc) if self.previous.found else "no earlier run"
            self.decisions.note(doc.key, "populate", False, why or self._why_populated(doc, final, schema, shown))
        if self.store is not None:
            self.store.records(self.run, self._records(filled, final, shown))

    def _records(self, filled: PopulateResult, final: Mapping[str, str], shown: ShownLog) -> Iterator[
            tuple[str, str, list[dict[str, Any]], dict[str, Any] | None]]:
        """The records as the record keeps them: per document populated, its content, final note, records and
        the final notes it was shown when chosen per document."""
        # each table holds its records in the order of the documents (`filled.per_doc`'s), so a document's are
        # the next run of each table's: taken as the documents come, not grouped for all of them first
        tables = [(name, iter(rows)) for name, rows in filled.tables.items()]
        ahead: list[Mapping[str, Any] | None] = [next(rows, None) for _, rows in tables]
        content = self.content
        for k in filled.per_doc:
            records = []
            for i, (name, rows) in enumerate(tables):
                while (row := ahead[i]) is not None and _part_key(row) == k:
                    records.append({**row, "_table": name})
                    ahead[i] = next(rows, None)
            seen = shown.get(k)
            yield (content[k], final.get(k, ""), records,
                   {"notes": self._population_notes(seen, final), "digest": seen.digest}
                   if seen is not None else None)

    def _why_populated(self, doc: Document, final: Mapping[str, str], schema: Mapping[str, Any],
                       filled: ShownLog) -> str:
        """Why a document an earlier run populated was populated again: its final note, the schema, or the
        final notes it was shown (its own selection, or every note) changed."""
        content = self.content[doc.key]
        earlier = self.previous.records.get(content)
        if earlier is None:
            return "no earlier records"
        if earlier[0] != final.get(doc.key, ""):
            return "final note changed"
        if self.previous.schema is not None and dict(self.previous.schema) != dict(schema):
            return "schema changed"
        shown, before = filled.get(doc.key), self.previous.shown.get(content)
        if shown is not None or before is not None:
            if shown is None or before is None or self._population_notes(shown, final) != before[0]:
                return "notes shown changed"
            if shown.digest != before[1]:
                return "notes shown arranged otherwise (the same notes)"
        elif self._finals_changed(final):
            return "every note is shown, and the notes changed"
        return "request changed (placement or notes shown)"

    def _population_notes(self, shown: Shown, final: Mapping[str, str]) -> str:
        """The final notes a population call was shown, in full or listed (`shown_digest`)."""
        if self._final_ids is None or self._final_ids[0] is not final:
            self._final_ids = (final, NoteIds(self.content, final))
        return self._final_ids[1].digest((*shown.full, *shown.listed))

    def _finals_changed(self, final: Mapping[str, str]) -> bool:
        """Whether the final notes (every one: what population shows when all fit) differ from the earlier
        run's; compared once a run (each set holds a note per document)."""
        if self._finals_differ is None:
            now = self._identities({k: v for k, v in final.items() if v and k in self.content})
            before = {(c, note_digest(note)) for c, (note, _) in self.previous.records.items() if note}
            self._finals_differ = now != before
        return self._finals_differ

    def summary(self) -> dict[str, Any]:
        """For the manifest and `--json`: the mode, the earlier run, counts per stage, calls reused."""
        layer = self._layer
        return {"mode": self.mode, "previous_run": self.previous.run_dir, "counts": self.decisions.counts(),
                "why": self.decisions.whys(),
                "recomputed": self.decisions.recomputed() if self.previous.found else {},
                "calls_reused": sum(layer.replayed.values()) if layer else 0,
                "prompt_tokens_reused": layer.replayed_usage.prompt_tokens if layer else 0}

    def finish(self, schema: Mapping[str, Any] | None) -> None:
        """The run finished: its `schema` to the record, and the run with it, for the next run of the question
        (its reads and records were written as they were decided)."""
        if self.store is not None:
            self.store.finish(self.run, schema)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
