"""The same question over a changed corpus: exact reuse is a fresh run's result, approximate reuse reads less."""

import json
from collections import Counter
from pathlib import Path

import pytest

import r3con
from r3con.corpus.documents import Document, documents_from_texts, load_corpus
from r3con.errors import ConfigError
from r3con.pipeline.method import run
from r3con.pipeline.reuse import TOP, Previous, Read, Reuse, content_key, note_digest, shown_digest

TASK = "Who travelled to Whitby, and what did they report there?"
SUBJECTS = ["the harbour", "the abbey", "the churchyard", "the cliffs", "the ship", "the storm", "the pier",
            "the lighthouse", "the market", "the station", "the river", "the bridge"]
TEXTS = [(f"Letter {i}", f"Traveller {i} went to Whitby and reported on {SUBJECTS[i % len(SUBJECTS)]}. "
          f"They stayed {i + 2} days. The weather on day {i} was grey and the sea was rough near {SUBJECTS[i - 1]}.")
         for i in range(12)]


def settings(server, tmp_path, cache: str | None, mode: str = "exact", **extra):
    return r3con.Settings.resolve(
        env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path / "runs", cache=cache is not None,
        cache_path=tmp_path / cache if cache else None, adaptive_placement=False, reuse=mode,
        **{"notes_budget_tokens": 120, **extra})


def outputs(result) -> tuple[bytes, ...]:
    folder = result.run_dir
    return (*(p.read_bytes() for p in sorted((folder / "notes").glob("round-*.json"))),
            (folder / "records.json").read_bytes(), (folder / "answer.txt").read_bytes())


async def test_exact_reuse_over_a_grown_corpus_is_a_fresh_run_and_says_what_it_reused(fake_server, tmp_path):
    await run(TASK, documents_from_texts(TEXTS[:10], stable=True), settings(fake_server, tmp_path, "chain.sqlite"))
    grown = documents_from_texts(TEXTS, stable=True)
    reused = await run(TASK, grown, settings(fake_server, tmp_path, "chain.sqlite"))
    fresh = await run(TASK, grown, settings(fake_server, tmp_path, None))
    assert outputs(reused) == outputs(fresh)
    assert reused.usage.calls < fresh.usage.calls
    decisions = json.loads((reused.run_dir / "reuse.json").read_text())
    assert decisions["mode"] == "exact" and decisions["previous_run"]
    new, old = grown[10].key, grown[0].key
    assert decisions["documents"][new]["relevance-1"] == {"reused": False, "why": "new document"}
    assert decisions["documents"][old]["relevance-1"] == {"reused": True, "why": "same request"}
    assert reused.reuse is not None and reused.reuse["calls_reused"] >= 10
    assert reused.summary()["reuse"]["counts"]["relevance-1"] == {"reused": 10, "recomputed": 2}
    assert reused.summary()["reuse"]["recomputed"][new]["relevance-1"] == "new document"
    assert "relevance-1" not in reused.summary()["reuse"]["recomputed"].get(old, {})
    manifest = json.loads((reused.run_dir / "manifest.json").read_text())
    assert manifest["reuse"]["counts"]["relevance-1"]["reused"] == 10


async def test_approximate_reuse_reads_a_changed_document_again_and_keeps_the_rest(fake_server, tmp_path):
    first = await run(TASK, documents_from_texts(TEXTS, stable=True), settings(fake_server, tmp_path, "c.sqlite", "approximate"))
    changed = list(TEXTS)
    changed[5] = (changed[5][0], changed[5][1] + " A storm broke the mast of a Russian ship.")
    again = await run(TASK, documents_from_texts(changed, stable=True), settings(fake_server, tmp_path, "c.sqlite", "approximate"))
    decisions = json.loads((again.run_dir / "reuse.json").read_text())["documents"]
    sixth = documents_from_texts(changed, stable=True)[5].number
    assert decisions[str(sixth)]["relevance-1"] == {"reused": False, "why": "changed document"}
    assert decisions[str(sixth)]["populate"]["reused"] is False
    kept = [k for k, stages in decisions.items() if stages["relevance-1"]["reused"]]
    assert len(kept) == 11
    assert "schema" not in again.by_stage, "the schema is kept"
    assert again.schema == first.schema
    assert again.usage.calls < first.usage.calls / 3
    before = {r["_doc"] for rows in first.records.values() for r in rows} - {sixth}
    assert before and before <= {r["_doc"] for rows in again.records.values() for r in rows}, "kept records stay"


async def test_deleted_documents_leave_with_their_notes_and_records(fake_server, tmp_path):
    await run(TASK, documents_from_texts(TEXTS, stable=True), settings(fake_server, tmp_path, "d.sqlite", "approximate"))
    fewer = documents_from_texts(TEXTS[:4] + TEXTS[6:], stable=True)
    result = await run(TASK, fewer, settings(fake_server, tmp_path, "d.sqlite", "approximate"))
    titles = {r["_title"] for rows in result.records.values() for r in rows}
    assert not titles & {"Letter 4", "Letter 5"}
    assert len(result.notes[-1]) == 10
    numbers = {d.number: d.title for d in fewer}
    for rows in result.records.values():  # kept records carry their document's number, unchanged
        for r in rows:
            assert numbers[r["_doc"]] == r["_title"]


async def test_reuse_off_reuses_nothing_and_without_a_cache_nothing_is_recorded(fake_server, tmp_path):
    docs = documents_from_texts(TEXTS[:4], stable=True)
    await run(TASK, docs, settings(fake_server, tmp_path, "o.sqlite", "off"))
    off = await run(TASK, docs, settings(fake_server, tmp_path, "o.sqlite", "off"))
    assert off.reuse is not None and off.reuse["calls_reused"] == 0 and off.reuse["previous_run"] is None
    exact = await run(TASK, docs, settings(fake_server, tmp_path, "o.sqlite"))  # the runs with off were recorded
    assert exact.usage.calls == 0 and exact.reuse is not None and exact.reuse["previous_run"]
    assert not (tmp_path / "runs" / "reuse.sqlite").exists() and (tmp_path / "o.reuse.sqlite").is_file()


def test_reuse_must_be_a_known_mode():
    with pytest.raises(ConfigError, match="not valid for reuse: expected one of exact, approximate, off"):
        r3con.Settings.resolve(env={}, reuse="sometimes")


def _reuse(previous: Previous, docs) -> Reuse:
    reuse = Reuse("approximate", None, "q", Path("run"), docs)
    reuse.previous = previous
    return reuse


def test_approximate_rereads_only_when_a_new_or_changed_note_ranks_among_its_top_notes():
    docs = documents_from_texts(TEXTS[:4], stable=True)
    key = [d.key for d in docs]
    c = [content_key(d) for d in docs]
    earlier_notes = {c[1]: "note one", c[2]: "note two", c[3]: "note three"}
    reads = {(1, k): Read(v, shown_digest(()), frozenset()) for k, v in earlier_notes.items()}
    reads[(2, c[0])] = Read("kept note", shown_digest({(c[1], note_digest("note one"))}),
                            frozenset({(c[3], key[3])}), frozenset({c[1]}))
    reuse = _reuse(Previous(run_dir="earlier", reads=reads), docs)
    assert reuse.keep_note(docs[0], 2, {key[1]: "note one"}) == "kept note"
    # an old, unchanged note that now ranks first is no reason to read again
    assert reuse.keep_note(docs[0], 2, {key[1]: "note one", key[3]: "note three"}) == "kept note"
    assert reuse.keep_note(docs[0], 2, {key[1]: "note one", key[2]: "note two, now longer"}) is None
    assert reuse._reasons[(key[0], 2)] == f"a new or changed note ranks among its top {TOP}"
    # a changed note that ranks below the first (not in `top`) does not matter, shown in full or not
    assert reuse.keep_note(docs[0], 2, {key[1]: "note one"}) == "kept note"
    gone = _reuse(Previous(run_dir="earlier", reads=reads), [docs[0], docs[2], docs[3]])
    assert gone.keep_note(docs[0], 2, {key[2]: "note two"}) is None  # the note that ranked first (document 2) left
    named = _reuse(Previous(run_dir="earlier", reads=reads), docs[:3])
    assert named.keep_note(docs[0], 2, {key[1]: "note one"}) is None  # its note names the fourth, which left
    assert reuse.keep_note(docs[1], 1, None) == "note one"  # round 1: the same document, the same note


async def test_with_every_note_shown_a_new_note_repeats_every_later_read_and_says_so(fake_server, tmp_path):
    await run(TASK, documents_from_texts(TEXTS[:6], stable=True), settings(fake_server, tmp_path, "e.sqlite",
                                                              notes_budget_tokens=0))
    grown = await run(TASK, documents_from_texts(TEXTS[:7], stable=True), settings(fake_server, tmp_path, "e.sqlite",
                                                                      notes_budget_tokens=0))
    recomputed = grown.reuse["recomputed"]
    old = [d.key for d in documents_from_texts(TEXTS[:6], stable=True)]
    assert all(recomputed[k]["relevance-2"] == "every note is shown, and the notes changed" for k in old)
    assert all("relevance-1" not in recomputed.get(k, {}) for k in old), "round 1 is the same request"
    why = [recomputed[k]["populate"] for k in old]
    assert set(why) <= {"every note is shown, and the notes changed", "final note changed"}
    assert "every note is shown, and the notes changed" in why


async def test_a_document_inserted_among_the_others_costs_what_one_appended_costs(fake_server, tmp_path):
    base = TEXTS[:10]
    costs = {}
    for name, grown in (("appended", base + TEXTS[10:11]), ("interleaved", base[:5] + TEXTS[10:11] + base[5:])):
        await run(TASK, documents_from_texts(base, stable=True), settings(fake_server, tmp_path, f"{name}.sqlite"))
        docs = documents_from_texts(grown, stable=True)
        reused = await run(TASK, docs, settings(fake_server, tmp_path, f"{name}.sqlite"))
        fresh = await run(TASK, docs, settings(fake_server, tmp_path, None))
        assert outputs(reused) == outputs(fresh)
        assert reused.reuse["counts"]["relevance-1"] == {"reused": 10, "recomputed": 1}
        costs[name] = reused.usage.calls
    assert costs["interleaved"] <= costs["appended"]


async def test_the_same_question_differently_typed_finds_the_earlier_run(fake_server, tmp_path):
    docs = documents_from_texts(TEXTS[:4], stable=True)
    first = await run(TASK, docs, settings(fake_server, tmp_path, "q.sqlite", "approximate"))
    typed = "  " + TASK.upper().rstrip("?").replace(" ", "  ") + " "
    again = await run(typed, docs, settings(fake_server, tmp_path, "q.sqlite", "approximate"))
    assert again.reuse["previous_run"] == str(first.run_dir)
    assert again.reuse["counts"]["relevance-1"] == {"reused": 4, "recomputed": 0}


async def test_approximate_with_every_note_shown_rereads_only_where_a_new_note_ranks_first(fake_server, tmp_path):
    every = {"notes_budget_tokens": 0}
    await run(TASK, documents_from_texts(TEXTS[:10], stable=True), settings(fake_server, tmp_path, "a.sqlite", "approximate",
                                                               **every))
    docs = documents_from_texts(TEXTS[:5] + TEXTS[10:11] + TEXTS[5:10], stable=True)
    approximate = await run(TASK, docs, settings(fake_server, tmp_path, "a.sqlite", "approximate", **every))
    why = approximate.reuse["why"]["relevance-2"]
    assert why.get(f"kept: no new or changed note among its top {TOP}", 0) >= 1
    rereads = why.get(f"a new or changed note ranks among its top {TOP}", 0)
    shown = [json.loads(line) for line in (approximate.run_dir / "notes" / "shown-2.jsonl").read_text().splitlines()]
    new = docs[5].key
    assert rereads == sum(1 for s in shown if new in s.get("top", ()))  # exactly the reads the new note ranks first for
    assert all(len(s.get("top", ())) <= TOP for s in shown)
    decisions = json.loads((approximate.run_dir / "reuse.json").read_text())["documents"]  # says which ranked first
    assert all(decisions[s["doc"]]["relevance-2"].get("top", []) == s.get("top", []) for s in shown)


async def test_a_file_added_in_the_middle_or_edited_by_one_character_leaves_the_other_files_reads(fake_server,
                                                                                                     tmp_path):
    folder = tmp_path / "letters"
    folder.mkdir()
    for i, (_, text) in enumerate(TEXTS[:8]):
        (folder / f"letter-{2 * i:02d}.txt").write_text(text)
    await run(TASK, load_corpus([folder]).documents, settings(fake_server, tmp_path, "f.sqlite", "approximate"))
    (folder / "letter-07.txt").write_text(TEXTS[10][1])  # sorts among the others
    grown = load_corpus([folder]).documents
    added = await run(TASK, grown, settings(fake_server, tmp_path, "f.sqlite", "approximate"))
    assert added.reuse["counts"]["relevance-1"] == {"reused": 8, "recomputed": 1}
    edited = folder / "letter-04.txt"
    edited.write_text(edited.read_text().replace("grey", "gray"))
    docs = load_corpus([folder]).documents
    again = await run(TASK, docs, settings(fake_server, tmp_path, "f.sqlite", "approximate"))
    number = next(d.key for d in docs if d.source.endswith("letter-04.txt"))
    assert again.reuse["recomputed"][number]["relevance-1"] == "changed document"
    assert again.reuse["counts"]["relevance-1"] == {"reused": 8, "recomputed": 1}
    shown = [json.loads(line) for line in (again.run_dir / "notes" / "shown-2.jsonl").read_text().splitlines()]
    mattered = {s["doc"] for s in shown if number in s.get("top", ())} | {number}
    reread = {k for k, stages in again.reuse["recomputed"].items() if "relevance-2" in stages}
    assert number in reread and reread <= mattered  # the edited one, and reads its note ranks first for


def _population_seen(result) -> dict[str, tuple]:
    """Per document: its final note, and the notes (key, text) its population call was shown."""
    folder = result.run_dir
    final = {e["doc"]: e["note"] for e in json.loads((folder / "notes" / "round-2.json").read_text())}
    shown = [json.loads(line) for line in (folder / "notes" / "shown-populate.jsonl").read_text().splitlines()]
    return {s["doc"]: (final.get(s["doc"], ""), tuple((k, final.get(k)) for k in s["full"] + s["listed"]))
            for s in shown}


BUDGET = {"notes_budget_tokens": 300}  # the notes do not all fit: half of it for those that rank first for the task


def _held(result, name: str) -> Counter:
    """How many calls' notes (in full or as index lines) held each document's note, per notes/shown-NAME.jsonl."""
    lines = (result.run_dir / "notes" / f"shown-{name}.jsonl").read_text().splitlines()
    return Counter(k for line in lines for k in json.loads(line)["full"] + json.loads(line)["listed"])


async def test_a_deleted_note_repopulates_only_the_documents_whose_own_selection_held_it(fake_server, tmp_path):
    docs = documents_from_texts(TEXTS, stable=True)
    first = await run(TASK, docs, settings(fake_server, tmp_path, "p.sqlite", **BUDGET))
    before, populated, read = _population_seen(first), _held(first, "populate"), _held(first, "2")
    assert len(set(before.values())) == len(before), "each document is shown its own selection"
    # a document no later read was shown (so no other final note changes), whose note only its own population held
    gone = next(d for d in docs if populated[d.key] == 1 and not read[d.key])
    fewer = documents_from_texts([t for t in TEXTS if t[0] != gone.title], stable=True)
    again = await run(TASK, fewer, settings(fake_server, tmp_path, "p.sqlite", **BUDGET))
    fresh = await run(TASK, fewer, settings(fake_server, tmp_path, None, **BUDGET))
    assert outputs(again) == outputs(fresh)
    decisions = json.loads((again.run_dir / "reuse.json").read_text())["documents"]
    assert {k: d["populate"] for k, d in decisions.items()} == {
        d.key: {"reused": True, "why": "same request"} for d in fewer}, "one selection for all would hold it"


def test_the_reuse_record_takes_each_later_reads_notes_when_relevance_is_decided(tmp_path):
    """What a read was shown (most of what a run would hold a document) is written to the record once the
    relevance rounds are decided, and is not needed after: the round's log may go."""
    from r3con.notes.selection import Shown
    from r3con.notes.shown import ShownLog
    from r3con.pipeline.reuse import ReuseStore

    docs = documents_from_texts(TEXTS[:3], stable=True)
    reuse = Reuse("exact", ReuseStore(tmp_path / "reuse.sqlite"), "q", tmp_path / "run", docs)
    log = ShownLog()
    log.add(Shown(docs[0].key, 2, "selected", (docs[1].key,), (docs[2].key,), 0, 10, "d", (docs[1].key,)))
    notes = {d.key: f"note {d.key}" for d in docs}
    reuse.decide_relevance([notes, notes], [log.order(d.key for d in docs)], [frozenset(), frozenset()])
    log.close()
    assert ReuseStore(tmp_path / "reuse.sqlite").previous("q").reads == {}, "read once the run is finished"
    reuse.finish(None)
    previous = ReuseStore(tmp_path / "reuse.sqlite").previous("q")
    assert len(previous.reads) == 2 * len(docs)
    first, second = (reuse.content[d.key] for d in docs[:2])
    assert previous.reads[(2, first)].full == shown_digest({(second, note_digest(f"note {docs[1].key}"))})
    assert previous.reads[(2, second)].full == shown_digest(()), "a read with nothing logged was shown nothing in full"
    reuse.close()


def test_the_decisions_per_document_are_made_a_document_at_a_time_in_the_order_they_were_made():
    from r3con.pipeline.reuse import Decisions

    decisions = Decisions("exact", None)
    decisions.note("2", "relevance-1", True, "same request")
    decisions.note("1", "relevance-1", False, "no earlier run")
    decisions.note("1", "relevance-2", False, "notes shown changed", ("2",))
    decisions.note("2", "populate", True, "kept: final note unchanged")
    documents = decisions.documents()
    assert list(documents) == ["2", "1"] and len(documents) == 2 and "3" not in documents
    assert dict(documents) == {
        "2": {"relevance-1": {"reused": True, "why": "same request"},
              "populate": {"reused": True, "why": "kept: final note unchanged"}},
        "1": {"relevance-1": {"reused": False, "why": "no earlier run"},
              "relevance-2": {"reused": False, "why": "notes shown changed", "top": ["2"]}}}
    assert decisions.counts() == {"relevance-1": {"reused": 1, "recomputed": 1},
                                  "relevance-2": {"reused": 0, "recomputed": 1}, "populate": {"reused": 1, "recomputed": 0}}
    assert decisions.recomputed() == {"1": {"relevance-1": "no earlier run", "relevance-2": "notes shown changed"}}
    # a number a part and stage (its kind's), in an array a stage
    assert dict(decisions.by_stage["relevance-1"]) == {"2": 0, "1": 1} and dict(decisions.by_stage["populate"]) == {"2": 3}
    assert dict(decisions.by_stage["relevance-2"]) == {"1": 2} and len(decisions.kinds) == 4
    decisions.note("1", "relevance-2", True, "same request")  # decided again (a re-plan): the last decision stands
    assert decisions.documents()["1"]["relevance-2"] == {"reused": True, "why": "same request"}
    assert decisions.whys()["relevance-2"] == {"same request": 1} and len(decisions.kinds) == 4


def test_the_parts_contents_are_their_content_keys_held_as_bytes_in_the_parts_order():
    from r3con.pipeline.reuse import Contents

    docs = [Document(number=n, title=f"T{n}", text=f"text {n}") for n in (7, 3, 5)]
    contents = Contents(docs)
    assert dict(contents) == {d.key: content_key(d) for d in docs} and list(contents) == ["7", "3", "5"]
    assert "3" in contents and "4" not in contents and len(contents) == 3 and len(contents._digests) == 30
    with pytest.raises(KeyError):
        contents["4"]


def test_the_decisions_of_a_runs_parts_are_held_beside_their_places_in_the_parts_order():
    from r3con.corpus.places import Parts
    from r3con.pipeline.reuse import Decisions

    parts = Parts(Document(number=n, title=f"T{n}", text=f"text {n}") for n in (4, 8, 6))
    decisions = Decisions("exact", None, parts.places)
    decisions.note("6", "relevance-1", False, "no earlier run")
    decisions.note("4", "relevance-1", True, "same request")
    decisions.note("8", "relevance-2", False, "notes shown changed", ("4",))
    assert all(d._places is parts.places for d in decisions.by_stage.values()), "no dict of their own"
    assert list(decisions.documents()) == ["4", "6", "8"] and len(decisions.documents()) == 3
    assert decisions.of("relevance-2", "8") == (False, "notes shown changed", ("4",)) and decisions.of("relevance-2", "4") is None
    assert decisions.counts() == {"relevance-1": {"reused": 1, "recomputed": 1}, "relevance-2": {"reused": 0, "recomputed": 1}}


def test_the_notes_that_ranked_first_are_held_as_places_and_read_back_as_their_keys():
    from r3con.corpus.places import Parts
    from r3con.pipeline.reuse import Tops

    parts = Parts(Document(number=n, title=f"T{n}", text=f"text {n}") for n in (4, 8, 6, 2))
    tops = Tops(parts.places)
    tops["8"] = ("2", "4", "6")
    tops["4"] = ("8", "elsewhere")  # a key the parts lack: a tuple of keys for this read
    tops["6"] = ("4",)
    tops["2"] = ("6",)
    tops["2"] = ()  # decided again without one: none
    assert dict(tops) == {"8": ("2", "4", "6"), "6": ("4",), "4": ("8", "elsewhere")} and len(tops) == 3
    assert tops._packed["8"] == 4 | 1 << 21 | 3 << 42 and "4" not in tops._packed and "2" not in tops


def test_what_a_call_was_shown_is_one_digest_of_its_notes_whatever_their_order(tmp_path):
    """The record keeps a set of notes as one digest: the same for the same notes in any order (a note named
    twice counts once) whether made from the run's notes or from an older record's pairs, and another when a
    note changes or two documents' notes trade places."""
    import sqlite3

    from r3con.pipeline.reuse import Contents, NoteIds, ReuseStore

    docs = documents_from_texts(TEXTS[:4], stable=True)
    keys = [d.key for d in docs]
    contents = Contents(docs)
    notes = {k: f"note {i}" for i, k in enumerate(keys)}
    pairs = [(contents[k], note_digest(notes[k])) for k in keys]
    ids = NoteIds(contents, notes)
    assert ids.digest(keys[:3]) == ids.digest([keys[2], keys[0], keys[1], keys[0]]) == shown_digest(pairs[:3])
    assert ids.digest(()) == shown_digest(()) != ids.digest(keys[:1])
    assert NoteIds(contents, {**notes, keys[1]: "note 1, changed"}).digest(keys[:3]) != shown_digest(pairs[:3])
    traded = NoteIds(contents, {**notes, keys[0]: notes[keys[1]], keys[1]: notes[keys[0]]})
    assert traded.digest(keys[:2]) != ids.digest(keys[:2])
    # a record written before the digest (the pairs themselves) reads as the digest of those pairs
    store = ReuseStore(tmp_path / "reuse.sqlite")
    run = store.begin("q", tmp_path / "run")
    store.reads(run, [(2, pairs[0][0], "1", "a note", shown_digest(()), [], [])])
    store.finish(run, None)
    store.close()
    db = sqlite3.connect(tmp_path / "reuse.sqlite")
    with db:
        db.execute("UPDATE reads SET full = ?", (json.dumps([list(p) for p in pairs[1:3]]),))
    db.close()
    assert ReuseStore(tmp_path / "reuse.sqlite").previous("q").reads[(2, pairs[0][0])].full == ids.digest(keys[1:3])
