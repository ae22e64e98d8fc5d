import json
import math
import re

import numpy as np
import pytest

import r3con
from r3con.corpus.documents import Document, documents_from_texts
from r3con.llm import build_llm
from r3con.notes.final import FinalNotes
from r3con.notes.selection import (
    NoteRef,
    NotesSelector,
    PackedChoice,
    PlannedChoices,
    format_notes,
    made_here,
    notes_bm25,
    prefix_order,
    terms,
)
from r3con.notes.tree import in_prefix_order
from r3con.pipeline.method import run
from r3con.stages.plan import Placement
from r3con.stages.populate import PopulateOptions, populate
from r3con.stages.relevance import RelevanceOptions, extract_relevance
from r3con.testing import FakeLLMServer
from r3con.tokens import estimate_tokens

from .fakes import SIMPLE_SCHEMA, ScriptedLLM, SelectsElsewhere, document_number, quote, user_text

FILLER = "The weather stayed grey and the roads were quiet for most of the week. " * 6


def refs(n: int) -> list[NoteRef]:
    out = []
    for i in range(1, n + 1):
        topic = "the shipment of silver spoons reached Rotterdam" if i in (7, 13) else "nothing about cargo"
        out.append(NoteRef(str(i), f"Report {i}", f"Report {i} says {topic}. {FILLER}"))
    return out


def full_notes(text: str) -> list[str]:
    return re.findall(r'<note document="([^"]+)"', text)


async def test_when_every_note_fits_the_text_is_exactly_the_papers():
    notes = refs(5)
    selector = NotesSelector(notes, budget=10_000)
    choice = await selector.select("Which shipments reached Rotterdam?", exclude="2")
    assert choice.text == format_notes([r for r in notes if r.label != "2"])
    assert not choice.selected and choice.shown == 4
    unbounded = await NotesSelector(notes, budget=None).select("anything")
    assert unbounded.text == format_notes(notes)


async def test_over_budget_the_most_relevant_notes_are_full_and_the_rest_an_index():
    notes = refs(40)
    budget = 1200
    assert estimate_tokens(format_notes(notes)) > 4 * budget
    choice = await NotesSelector(notes, budget=budget).select("Which shipments of silver spoons reached Rotterdam?",
                                                             exclude="13")
    shown = full_notes(choice.text)
    assert "7" in shown and "13" not in shown, "the relevant note is in full; the excluded one nowhere"
    assert choice.selected and choice.shown == len(shown) and choice.indexed + choice.shown + choice.omitted == 39
    assert estimate_tokens(choice.text) <= budget + 50
    lines = re.findall(r'^Document (\d+) "Report \d+": (.*)$', choice.text, flags=re.MULTILINE)
    assert lines and all(n not in shown and n != "13" for n, _ in lines)
    assert all(len(start.split()) <= 13 for _, start in lines), "index lines give only the first words"


async def test_a_tiny_budget_keeps_the_best_notes_and_says_how_many_were_left_out():
    notes = refs(200)
    choice = await NotesSelector(notes, budget=300).select("silver spoons Rotterdam")
    assert choice.omitted > 0 and "more documents with notes, not listed" in choice.text
    assert full_notes(choice.text)[:1] in (["7"], ["13"])
    nothing = await NotesSelector(notes, budget=300).select("silver spoons", budget=0)
    assert full_notes(nothing.text) == [] and nothing.omitted == 200


def test_bm25_ranks_the_matching_text_first_and_handles_cjk():
    index = notes_bm25(["the cat sat on the mat", "silver spoons shipped to Rotterdam", "dogs bark", "北京的天气很好"])
    scores = index.scores("Rotterdam silver")
    assert max(range(4), key=scores.__getitem__) == 1 and scores[2] == 0
    cjk = index.scores("北京天气")
    assert max(range(4), key=cjk.__getitem__) == 3
    assert "北京" in terms("北京的天气")


async def test_relevance_rounds_use_the_budget_and_the_documents_own_note_as_query():
    texts = [(f"Report {i}", f"Report {i}. " + ("Silver spoons reached Rotterdam." if i == 4 else FILLER))
             for i in range(1, 31)]
    docs = documents_from_texts(texts)

    def note(request):
        n = document_number(request)
        return "Silver spoons reached Rotterdam by ship." if n == 4 else f"Report {n}: {FILLER}"

    llm = ScriptedLLM({"relevance": note})
    result = await extract_relevance(llm, "Where did the silver spoons go?", docs,
                                     RelevanceOptions(rounds=2, notes_budget=800))
    round2 = [r for r in llm.history if r.round == 2]
    for request in round2:
        text = request.messages[-1].content
        assert f'<note document="{request.doc}"' not in text
        if request.doc != 4:
            assert '<note document="4"' in text, "the relevant note is always shown in full"
        assert "<notes_index>" in text
    assert (result.selections.calls, result.selections.selected) == (30, 30)


async def test_cache_layout_gives_every_call_of_a_document_the_same_prefix():
    # documents longer than the notes and the schema: they come first in every call
    docs = documents_from_texts([("Alpha", "Ann Lee is 34. " * 200), ("Beta", "Bob Stone is 41. " * 200)])
    for breakpoints in (False, True):
        llm = ScriptedLLM({"relevance": lambda r: f"note {document_number(r)}",
                           "populate": lambda r: json.dumps({"people": [{"name": "Ann", "_passage": quote(r)}]})})
        await extract_relevance(llm, "Who is how old?", docs,
                                RelevanceOptions(rounds=2, breakpoints=breakpoints))
        await populate(llm, "Who is how old?", SIMPLE_SCHEMA, docs, "<notes>\n</notes>",
                       PopulateOptions(breakpoints=breakpoints))
        for doc in docs:
            calls = [r for r in llm.history if r.doc == doc.number]
            assert len(calls) == 3, "two relevance rounds and the population call"
            body = f'<document number="{doc.number}" title="{doc.title}">\n{doc.text}\n</document>'
            wire = [[m.to_openai() for m in r.messages] for r in calls]
            assert len({json.dumps(w[0]) for w in wire}) == 1, "one system message shared by the stages"
            if breakpoints:
                assert len({json.dumps(w[1]) for w in wire}) == 1, "the document message is byte-identical"
                assert wire[0][1]["content"] == [{"type": "text", "text": body, "cache_control": {"type": "ephemeral"}}]
            else:
                assert all(w[1]["content"].startswith(body + "\n\n") for w in wire)
                assert len({w[1]["content"] for w in wire}) == 3, "what follows the document differs"


async def test_paper_layout_puts_the_instructions_first():
    docs = documents_from_texts([("Alpha", "Ann Lee is 34.")])
    llm = ScriptedLLM({"relevance": lambda r: "note"})
    await extract_relevance(llm, "Who?", docs, RelevanceOptions(rounds=1, placement=Placement("paper")))
    assert llm.history[0].messages[1].content.startswith("Write a task-focused note")


async def test_a_request_too_long_for_the_window_is_retried_with_fewer_notes(tmp_path):
    sentence = ("Mina wrote to Lucy about the voyage of the ship number {i}, which sailed from Varna with "
                "fifty boxes of earth, a silent crew and a captain who kept a log of every strange night on the sea. ")
    texts = [(f"Diary {i}", sentence.format(i=i) * 4) for i in range(1, 31)]
    with FakeLLMServer(max_model_len=4096) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path,
                                          context_window=16_384, cache=False, notes_budget_tokens=8000,
                                          data_view_chars=2000)
        result = await run("Who wrote about the voyage of which ship?", documents_from_texts(texts), settings)
        calls = server.calls()
    too_long = [c for c in calls if c.get("fault") == "too-long"]
    assert too_long, "the window the server enforces is smaller than the one r3con was told"
    assert not result.degraded, "every refused request succeeded with fewer notes"
    answered = [c for c in calls if c.get("status") == 200 and c["stage"] in ("relevance", "populate")]
    assert all(c["prompt_tokens"] <= 4096 for c in answered)
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["notes_selection"]["budget_tokens"] == 8000
    assert manifest["notes_selection"]["calls"]["relevance"]["selected"] > 0


async def test_the_manifest_records_the_selection(fake_server, tmp_path):
    texts = [(f"Note {i}", f"Ann Lee met Bob Stone in Oslo on day {i}, by the harbour, in the rain. " * 10)
             for i in range(1, 9)]
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, api_key="x", out_dir=tmp_path,
                                      cache=False, notes_budget_tokens=150)
    result = await run("Where did Ann Lee meet Bob Stone?", documents_from_texts(texts), settings)
    selection = json.loads((result.run_dir / "manifest.json").read_text())["notes_selection"]
    assert selection["budget_tokens"] == 150 and selection["budget_source"] == "config"
    assert selection["ranking"] == "bm25"
    assert selection["calls"]["relevance"] == {"calls": 8, "selected": 8}
    assert selection["final"]["indexed"] + selection["final"]["omitted"] > 0
    assert selection["final"]["tokens"] < selection["final"]["full_tokens"]


async def test_the_cache_layout_is_served_from_the_prefix_cache_and_reports_it_per_stage(tmp_path):
    texts = [(f"Diary {i}", f"Mina wrote to Lucy about the ship {i} that sailed from Varna to Whitby. " * 150)
             for i in range(1, 7)]
    shares = {}
    for layout in ("cache", "paper"):
        with FakeLLMServer() as server:
            settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", cache=False,
                                              out_dir=tmp_path / layout, layout=layout)
            result = await run("Which ship sailed to Whitby?", documents_from_texts(texts), settings)
        usage = json.loads((result.run_dir / "usage.json").read_text())["by_stage"]
        per_doc = [usage[s] for s in ("relevance", "populate")]
        shares[layout] = sum(u["cached_tokens"] for u in per_doc) / sum(u["prompt_tokens"] for u in per_doc)
        assert all(u["cached_tokens"] <= u["prompt_tokens"] for u in usage.values())
    assert shares["cache"] > 0.5 and shares["cache"] > 2 * shares["paper"]


def test_prefix_order_is_every_other_position_and_neighbours_share_long_prefixes():
    n = 100
    orders = [prefix_order(n, own) for own in range(n)]
    for own, order in enumerate(orders):
        assert sorted(order) == [i for i in range(n) if i != own], "the same notes, only the order differs"
    assert prefix_order(5, None) == [0, 1, 2, 3, 4]

    def shared(a: list[int], b: list[int]) -> int:
        return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))

    # what a prefix cache would have to prefill when the calls run in corpus order: the part of each
    # call's notes not shared with the longest matching earlier call
    tree = sum(n - 1 - max((shared(orders[i], orders[j]) for j in range(i)), default=0) for i in range(n))
    corpus = [[j for j in range(n) if j != own] for own in range(n)]
    flat = sum(n - 1 - max((shared(corpus[i], corpus[j]) for j in range(i)), default=0) for i in range(n))
    assert flat > n * n / 2 - n, "corpus order: each call prefills about half the notes"
    assert tree < 2 * n * math.log2(n), f"prefix order: about log2(n) notes a call ({tree} vs {flat})"


def test_a_selection_in_prefix_order_keeps_every_notes_order_and_its_own_notes():
    n = 37
    for own in range(n):
        assert in_prefix_order((i for i in range(n) if i != own), n, own) == prefix_order(n, own)
    chosen = [3, 30, 5, 17, 22, 9]
    ordered = in_prefix_order(chosen, n, 4)
    assert sorted(ordered) == sorted(chosen) and ordered == [p for p in prefix_order(n, 4) if p in chosen]
    assert in_prefix_order(chosen, n, None) == sorted(chosen)


async def test_a_leading_selection_shows_the_same_notes_and_index_lines_in_prefix_order():
    notes = [NoteRef(str(i), f"Doc {i}", f"note {i} " + ("harbour ships " if i % 3 == 0 else "fields ") * 30)
            for i in range(1, 17)]
    selector = NotesSelector(notes, 400)
    choice = await selector.select("harbour ships", exclude="5")
    assert choice.selected and choice.indexed
    text = selector.prefix_text(choice, "5")
    assert full_notes(text) == [notes[i].label for i in prefix_order(16, 4) if notes[i].label in choice.full]
    listed = re.findall(r"^Document (\d+) ", text, re.M)
    assert listed == [notes[i].label for i in prefix_order(16, 4) if notes[i].label in choice.listed]
    assert sorted(full_notes(text)) == sorted(full_notes(choice.text)) and len(text) == len(choice.text)
    every = await NotesSelector(notes, None).select("harbour", exclude="5")
    assert NotesSelector(notes, None).prefix_text(every, "5") == NotesSelector(notes, None).shared_text("5")


async def test_short_documents_get_the_shared_notes_and_schema_first():
    long_note = "Ann Lee met Bob Stone in Oslo and they spoke of the harbour, the ships and the winter. " * 4
    docs = documents_from_texts([(f"Letter {i}", f"Ann Lee wrote on day {i}.") for i in range(1, 7)])
    llm = ScriptedLLM({"relevance": lambda r: f"{long_note} (document {document_number(r)})",
                       "populate": lambda r: json.dumps({"people": [{"name": "Ann", "_passage": quote(r)}]})})
    result = await extract_relevance(llm, "Who met whom?", docs, RelevanceOptions(rounds=2))
    notes = format_notes([NoteRef(d.key, d.title, result.final[d.key]) for d in docs])
    filled = await populate(llm, "Who met whom?", SIMPLE_SCHEMA, docs, notes, PopulateOptions())

    round1 = [r for r in llm.calls("relevance") if r.round == 1]
    assert all(r.messages[1].content.startswith("Write a task-focused note about the document below.")
               for r in round1), "no notes yet, but the notes to come outweigh the document: the instructions first"
    assert len({r.messages[1].content.split("<document number=")[0] for r in round1}) == 1, "the same for every call"
    round2 = [r for r in llm.calls("relevance") if r.round == 2]
    assert result.selections.shared_first == 6 and filled.shared_first == 6
    for request in round2:
        text = request.messages[1].content
        assert text.startswith("Write a task-focused note about the document below.")
        assert text.index("</notes>") < text.index("<document number=")
        shown = full_notes(text)
        own = str(request.doc)
        assert own not in shown and sorted(shown) == sorted(d.key for d in docs if d.key != own)
        assert shown == [docs[i].key for i in prefix_order(6, int(own) - 1)]
    prefixes = {r.messages[1].content.split("<document number=")[0] for r in llm.calls("populate")}
    assert len(prefixes) == 1, "every population call starts with the same task, schema and notes"
    assert all("from the document below" in r.messages[1].content for r in llm.calls("populate"))


async def test_putting_the_shared_part_first_is_served_from_the_servers_prefix_cache():
    long_note = "Ann Lee met Bob Stone in Oslo and they spoke of the harbour, the ships and the winter. " * 6
    docs = documents_from_texts([(f"Letter {i}", f"Ann Lee wrote to Bob on day {i} about Oslo.") for i in range(1, 13)])
    uncached = {}
    for first in (True, False):
        with FakeLLMServer() as server:
            settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", cache=False)
            async with build_llm(settings) as llm:
                relevance = await extract_relevance(llm, "Who met whom in Oslo?", docs,
                                                    RelevanceOptions(rounds=2, placement=Placement(shared_first=first)))
                notes = format_notes([NoteRef(d.key, d.title, relevance.final[d.key] or long_note) for d in docs])
                await populate(llm, "Who met whom in Oslo?", SIMPLE_SCHEMA, docs, notes,
                               PopulateOptions(placement=Placement(shared_first=first)))
            calls = [c for c in server.calls() if c.get("status") == 200 and c["stage"] in ("relevance", "populate")]
        uncached[first] = sum(c["prompt_tokens"] - c["cached_tokens"] for c in calls)
    assert uncached[True] < 0.5 * uncached[False], uncached


async def test_documents_without_a_note_share_the_selection_for_the_task_and_get_it_first():
    long_note = "Ann Lee met Bob Stone in Oslo and they spoke of the harbour, the ships and the winter. " * 3
    texts = [(f"Letter {i}", f"Ann Lee wrote on day {i}.") for i in range(1, 11)]
    texts += [(f"Ledger {i}", f"Sums for quarter {i}.") for i in range(1, 5)]
    docs = documents_from_texts(texts)
    llm = ScriptedLLM({"relevance": lambda r: "NONE" if "Sums" in user_text(r) else long_note})
    result = await extract_relevance(llm, "Who met whom?", docs, RelevanceOptions(rounds=2, notes_budget=200))
    round2 = {r.doc: r.messages[1].content for r in llm.calls("relevance") if r.round == 2}
    ledgers = [round2[d.number] for d in docs if d.title.startswith("Ledger")]
    letters = [round2[d.number] for d in docs if d.title.startswith("Letter")]
    assert result.selections.selected == 14, "the notes exceed the budget for every call"
    assert len({t.split("<document number=")[0] for t in ledgers}) == 1, "one byte-identical prefix"
    assert all(t.index("</notes") < t.index("<document number=") for t in ledgers)
    # the notes were expected over the budget: round 1 read each letter first, and its own selection follows it
    assert all(t.startswith("<document number=") for t in letters), "selected for their own note: document first"
    assert result.selections.shared_first == 4


async def test_a_large_set_of_notes_is_chosen_as_a_full_ranking_would_choose_it(monkeypatch):
    """Over many notes (with many equal scores), reading the ranking only as far as the budget lasts chooses
    exactly what sorting every note would: the same text, counts and keys, for queries with and without a
    line of their own, with and without an excluded note."""
    import random

    from r3con.notes import ranking as notes_module

    rng = random.Random(11)
    words = "revenue growth year company profit harbour ship storm letter report increase percent market".split()
    refs = [NoteRef(str(i), f"T{i}", " ".join(rng.choice(words) for _ in range(rng.randint(1, 40))))
            for i in range(1, 1501)]
    queries = [("revenue growth", None), ("revenue growth\nship storm harbour", "7"), ("market\nprofit", "1500")]
    for budget in (300, 4000, 20_000):
        partial = NotesSelector(refs, budget)
        chosen = [await partial.select(q, exclude=ex) for q, ex in queries]
        monkeypatch.setattr(notes_module, "BLOCK", 10**9)  # every choice from the whole order, sorted
        whole = NotesSelector(refs, budget)
        expected = [await whole.select(q, exclude=ex) for q, ex in queries]
        monkeypatch.undo()
        for got, want in zip(chosen, expected, strict=True):
            assert (got.text, got.shown, got.indexed, got.omitted, got.tokens, got.full, got.listed) == (
                want.text, want.shown, want.indexed, want.omitted, want.tokens, want.full, want.listed)
        assert any(c.selected for c in chosen)


async def test_a_choice_kept_without_its_text_renders_the_same_text():
    refs = [NoteRef(str(i), f"T{i}", f"Ann Lee met Bob Stone in Oslo on day {i}.") for i in range(1, 60)]
    for budget in (None, 200, 2000):
        selector = NotesSelector(refs, budget)
        full = await selector.select("Who met in Oslo?", exclude="3")
        kept = await selector.select("Who met in Oslo?", exclude="3", compact=True)
        assert (kept.text, kept.full, kept.listed) == ("", (), ())  # its positions alone, while a round is planned
        again = selector.filled(kept)
        assert (again.text, again.full, again.listed) == (full.text, full.full, full.listed)
        assert (kept.shown, kept.indexed, kept.omitted, kept.tokens) == (
            full.shown, full.indexed, full.omitted, full.tokens)


async def test_a_choice_made_elsewhere_travels_as_its_positions_and_unpacks_to_the_choice_made_here():
    import pickle

    refs = [NoteRef(str(i), f"T{i}", f"Ann Lee met Bob Stone in Oslo on day {i}.") for i in range(1, 300)]
    selector = NotesSelector(refs, 400)
    packed = await selector.packed("Who met in Oslo?", "3", top=3)
    here = await selector.select("Who met in Oslo?", exclude="3", compact=True, top=3)
    assert selector.unpack(pickle.loads(pickle.dumps(packed))) == here
    assert here.selected and len(here.top) == 3
    assert [refs[i].label for i in packed.picks.full.tolist()] == list(selector.filled(here).full)
    assert [refs[i].label for i in packed.picks.index.tolist()] == list(selector.filled(here).listed)
    # held a document while its round is planned: its positions as 4 bytes each and little besides (two
    # numpy arrays and their objects, as it was, took three times the room)
    positions = here.shown + here.indexed + len(here.top)
    assert len(pickle.dumps(packed)) <= 4 * positions + 250, (len(pickle.dumps(packed)), positions)


async def test_planned_choices_go_to_disk_as_bytes_and_come_back_the_same_once():
    refs = [NoteRef(str(i), f"T{i}", f"Ann Lee met Bob Stone in Oslo on day {i}.") for i in range(1, 300)]
    selector = NotesSelector(refs, 400)
    made = {"3": await selector.packed("Who met in Oslo?", "3", top=3),  # a selection, with its top
            "4": await NotesSelector(refs, None).packed("Who met in Oslo?", "4"),  # every note but its own
            "x": await NotesSelector(refs, None).packed("Who met in Oslo?")}  # every note
    planned = PlannedChoices()
    for key, packed in made.items():
        assert PackedChoice.from_bytes(packed.to_bytes()) == packed
        planned.add(key, packed)
    assert len(planned) == 3 and not any(isinstance(v, PackedChoice) for v in vars(planned).values())
    for key in ("4", "x", "3"):  # in any order, each once
        assert planned.pop(key) == made[key] and planned.pop(key) is None
    assert len(planned) == 0 and planned.pop("never") is None


async def test_choices_made_here_are_handed_over_one_at_a_time_in_order_when_asked():
    got: list[tuple[int, int]] = []

    async def double(n: int) -> int:
        return 2 * n

    items = list(range(600))  # the first alone, then 256 at a time
    assert await made_here(items, double) == [2 * n for n in items]
    assert await made_here(items, double, lambda i, made: got.append((i, made))) == []
    assert got == [(n, 2 * n) for n in items]


def test_picking_from_the_ranking_takes_what_a_scan_of_the_whole_ranking_takes():
    """`Ranked.pick` ranks only as far as it must; a plain scan of every position in `ranking` order must
    agree, over many ties, small budgets (most positions passed over), costs below zero or of zero and a
    skipped position."""
    import random

    from r3con.notes.ranking import Ranked
    from r3con.notes.retrieval import ranking

    def scan(scores, costs, budget, skip, taken=()):
        chosen, left = [], budget
        for i in ranking(scores):
            if i != skip and i not in taken and costs[i] <= left:
                chosen.append(i)
                left -= costs[i]
        return chosen, left

    rng = random.Random(5)
    for trial in range(300):
        n = rng.choice([3, 40, 600, 3000, 20000])
        scores = np.array([rng.choice([0.0, 1.0, 2.5, rng.random() * 9]) for _ in range(n)])
        low = -3 if trial % 7 == 0 else 0 if trial % 3 == 0 else 1  # below zero; free notes
        costs = np.array([rng.randint(low, 60) for _ in range(n)], dtype=np.int64)
        skip = rng.choice([None, rng.randrange(n)])
        budget = rng.choice([0, 5, 70, 900, 10**6])
        ranked = Ranked(scores, skip)
        first = ranked.pick(costs, budget)
        assert first == scan(scores, costs, budget, skip)
        second = ranked.pick(costs, budget // 3 + 7, taken=first[0])
        assert second == scan(scores, costs, budget // 3 + 7, skip, set(first[0]))


def test_the_best_positions_are_those_a_partition_of_every_position_gives():
    """`best_positions` narrows large sets from a sample of their scores; over many ties, all-equal scores, an ascending
    run, a kind that repeats, and a subset of positions, it returns what one partition of every position returns."""
    import random

    from r3con.notes.ranking import best_positions

    def partitioned(scores, among, size):
        among = np.arange(len(scores)) if among is None else among
        if len(among) > size:
            cut = np.partition(scores[among], len(among) - size)[len(among) - size]
            among = among[scores[among] >= cut]
        return among[np.argsort(-scores[among], kind="stable")]

    rng = random.Random(3)
    for trial in range(200):
        n = rng.choice([5, 300, 2049, 5000, 45000])
        scores = [np.array([rng.random() for _ in range(n)]),
                  np.array([rng.choice([0.0, 0.0, 0.0, 1.0, rng.random()]) for _ in range(n)]),
                  np.zeros(n),
                  np.sort(np.array([rng.random() for _ in range(n)])),
                  np.where(np.arange(n) % 200 == 1, 2.0, 1.0)][trial % 5]
        size = rng.choice([1, 256, 1000])
        among = None if trial % 2 else np.array(sorted(rng.sample(range(n), max(1, n // 2))))
        assert np.array_equal(best_positions(scores, among, size), partitioned(scores, among, size)), (trial, n, size)



def test_the_sample_finds_the_best_of_a_kind_that_repeats_with_an_even_period():
    """Notes made in turn from templates (the best every 200th, at odd positions): every 48th score alone
    would hold none of them, its floor would clear every note, and the partition would run over all of
    them (a read 10 times slower)."""
    from r3con.notes.ranking import _floor

    scores = np.where(np.arange(100_000) % 200 == 1, 2.0, 1.0)
    assert int((scores >= _floor(scores, 256)).sum()) == 500


NOTES_TEMPLATE = '<notes>\n{% for note in notes %}<note document="{{ note.label }}" title="{{ note.title | attr }}">\n{{ note.text }}\n</note>\n{% endfor %}</notes>\n'  # notes.j2 as it was: the notes are formatted in Python now, to this text
INDEX_TEMPLATE = '<notes_index>\nNotes on these other documents are not shown in full, to fit the context window; they were ranked less relevant to the task. Each line gives the document, its title and how its note begins.\n{% for line in lines %}Document {{ line.label }} "{{ line.title | attr }}": {{ line.start }}\n{% endfor %}{% if omitted %}... and more documents with notes, not listed.\n{% endif %}</notes_index>\n'  # notes_index.j2 as it was


def test_notes_and_their_index_are_formatted_as_the_templates_did():
    import random

    from r3con.notes.fragments import IndexLine, format_index, format_notes
    from r3con.notes.refs import NoteRef
    from r3con.prompts.render import render_source

    rng = random.Random(8)
    pieces = ["Acme", "\u6536\u5165", " ", 'say "hi"', "a & b", "line\nbreak", "12.5%", "<tag>", "{{ x }}"]
    for _ in range(200):
        refs = [NoteRef(label=str(rng.randrange(1, 99)), title="".join(rng.choices(pieces, k=3)),
                        text="".join(rng.choices(pieces, k=rng.randrange(1, 9)))) for _ in range(rng.randrange(1, 6))]
        assert format_notes(refs) == render_source(NOTES_TEMPLATE, notes=refs)
        lines = [IndexLine(label=r.label, title=r.title, start=r.text[:20]) for r in refs]
        for chosen in (lines, []):
            for omitted in (0, 3):
                assert format_index(chosen, omitted) == render_source(INDEX_TEMPLATE, lines=chosen, omitted=omitted)


async def test_a_choice_names_the_notes_that_rank_first_whether_or_not_every_note_fits():
    refs = [NoteRef("1", "Harbour", "The harbour master saw the Demeter run aground at Whitby."),
            NoteRef("2", "Abbey", "The abbey ruins stand above the town."),
            NoteRef("3", "Ship", "The Demeter carried fifty boxes of earth to Whitby."),
            NoteRef("4", "Market", "Fish prices rose in spring.")]
    query = "What happened to the Demeter at Whitby?"
    for budget in (None, 40):  # every note shown, and a selection
        choice = await NotesSelector(refs, budget).select(query, exclude="3", top=2)
        assert choice.top == ("1",), "only notes sharing a term with the query, never the read's own"
        assert (await NotesSelector(refs, budget).select(query, top=2)).top[:2] in {("1", "3"), ("3", "1")}
        assert (await NotesSelector(refs, budget).select(query)).top == ()


async def test_a_population_choice_kept_as_positions_renders_the_same_text_and_keys():
    docs = [Document(number=i, title=f"T{i}", text="") for i in range(1, 80)]
    notes = {d.key: f"Ann Lee met Bob Stone in Oslo on day {d.number}; the ship {d.number % 7} sailed." for d in docs}
    notes["5"] = ""  # a document without a note is shown the first part alone
    for budget in (None, 300):
        final = await FinalNotes.of("Who met in Oslo?", docs, notes, budget)
        assert final.per_document == (budget is not None)
        for key in ("1", "5", "40"):
            whole = await final.for_document(key)
            kept = await final.for_document(key, compact=True)
            again = final.filled(kept)
            assert (again.text, again.full, again.listed, again.tokens) == (
                whole.text, whole.full, whole.listed, whole.tokens), (budget, key)
            if kept.picks is not None and whole.listed:
                assert kept.listed == ()  # no keys held while the stage is planned
        if final.per_document:  # planned for every document at once, on disk, here or elsewhere: the same choices
            keys = ["1", "5", "40"]
            for selects in (None, SelectsElsewhere()):
                planned = await final.planned(keys, selects)
                assert len(planned) == 2, "a document without a note has none of its own"
                assert [final.chosen(k, planned) for k in keys] == [await final.for_document(k, compact=True)
                                                                     for k in keys]


async def test_final_notes_give_back_population_s_index_once_populated_and_choose_the_same_after():
    docs = [Document(number=i, title=f"T{i}", text="") for i in range(1, 80)]
    notes = {d.key: f"Ann Lee met Bob Stone in Oslo on day {d.number}; the ship {d.number % 7} sailed." for d in docs}
    final = await FinalNotes.of("Who met in Oslo?", docs, notes, 300)
    before = [await final.for_document(k) for k in ("1", "40")]
    refit = await final.selector.select(final.task, budget=150)
    assert final.selector._line_cost is not None and final._head is not None  # built by the choices above
    final.populated()
    assert final.selector._line_cost is None and final.selector._bm25 is None and final.selector._at is None
    assert final._head is None
    again = await final.selector.select(final.task, budget=150)  # an answer refitted: built again, the same choice
    assert (again.text, again.full, again.listed, again.tokens) == (refit.text, refit.full, refit.listed, refit.tokens)
    assert [await final.for_document(k) for k in ("1", "40")] == before


def test_a_shown_log_gives_back_each_entry_by_document_and_in_the_order_asked_and_its_file_goes_with_it():
    import gc

    from r3con.notes.selection import Shown
    from r3con.notes.shown import ShownLog

    def shown(doc: str, why: str = "selected") -> Shown:
        return Shown(doc, 2, why, (f"{doc}1", "Ünïcode"), ("9",), 3, 120, "abc", ("9",) if doc == "2" else ())

    log = ShownLog()
    for doc in ("3", "1", "2"):  # as the calls are answered
        log.add(shown(doc))
    log.add(shown("1", "refit"))  # a later entry replaces the first
    log.order(["1", "2", "3", "4"])  # corpus order; 4 has none
    assert [s.doc for s in log] == ["1", "2", "3"] and len(log) == 3 and "4" not in log
    assert log.get("1") == shown("1", "refit") and log.get("2") == shown("2") and log.get("4") is None
    assert [json.loads(line) for line in log.lines()] == [shown(d, "refit" if d == "1" else "selected").to_dict()
                                                         for d in ("1", "2", "3")]
    file = log._lines._file
    del log
    gc.collect()
    assert file.closed  # with the log (an unnamed file: nothing is left on disk)


def test_a_full_disk_under_the_shown_log_says_where(monkeypatch, tmp_path):
    import errno
    import tempfile

    from r3con.artifacts.folder import disk_full, is_disk_full
    from r3con.notes.selection import Shown
    from r3con.notes.shown import ShownLog

    class Full:
        def seek(self, *args):
            return 0

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            pass

    monkeypatch.setattr(tempfile, "TemporaryFile", Full)
    with pytest.raises(OSError) as raised:
        ShownLog().add(Shown("1", 2, "selected", ("2",), (), 0, 10, "d"))
    assert is_disk_full(raised.value)
    message = str(disk_full(tmp_path, raised.value))
    assert f"a temporary file in {tempfile.gettempdir()} (TMPDIR)" in message and "free some space" in message


def test_keyed_bytes_give_back_each_entry_by_key_hold_an_int_a_key_and_go_with_the_store():
    import gc

    from r3con.notes.keyed import KeyedBytes

    store = KeyedBytes()
    assert store.get("1") is None and store.pop("1") is None and len(store) == 0  # no file until the first entry
    store.put("1", b"first")
    store.put("2", "Ünïcode \x00 bytes".encode())
    store.put("1", b"replaced")  # a later entry for a key replaces it
    assert store.get("1") == b"replaced" and store.get("2") == "Ünïcode \x00 bytes".encode() and "2" in store
    assert len(store._where) == 2 and store._where._values.itemsize == 8, "8 bytes a key in an array, not an int each"
    assert store.pop("2") == "Ünïcode \x00 bytes".encode() and store.pop("2") is None and list(store) == ["1"]
    store.put("3", b"")
    assert store.get("3") == b"" and len(store) == 2
    file = store._file
    del store
    gc.collect()
    assert file.closed


def test_spooled_notes_read_back_each_note_equal_the_notes_pickle_as_them_and_hold_no_text():
    import pickle
    import tracemalloc

    from r3con.notes.keyed import SpooledNotes

    notes = {"1": "Ann Lee met Bob in Oslo.", "2": "", "3.2": "Ünïcode, \x00 and a lone \udc80 surrogate"}
    spooled = SpooledNotes(notes)
    assert spooled == notes and notes == spooled and dict(spooled) == notes and list(spooled) == ["1", "2", "3.2"]
    assert spooled["3.2"] == notes["3.2"] and spooled.get("4", "none") == "none" and "2" in spooled
    assert pickle.loads(pickle.dumps(spooled)) == notes and type(pickle.loads(pickle.dumps(spooled))) is dict
    many = {str(i): f"note {i} " + "word " * 60 for i in range(5_000)}  # 300-character notes
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        held = SpooledNotes(many)
        size = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held == many
    assert size < 5_000 * 120, f"{size:,} B for 5,000 notes of 300 characters: the texts were kept"


async def test_finished_rounds_notes_are_on_disk_and_read_as_the_round_wrote_them():
    from r3con.notes.keyed import SpooledNotes

    docs = [Document(number=i, title=f"T{i}", text=f"Person {i} is {20 + i} years old.") for i in range(1, 7)]
    llm = ScriptedLLM({"relevance": lambda r: f"note {document_number(r)}, round {r.round}"})
    result = await extract_relevance(llm, "How old is each person?", docs, RelevanceOptions(rounds=2))
    assert all(isinstance(notes, SpooledNotes) for notes in result.rounds)
    assert [dict(notes) for notes in result.rounds] == [{d.key: f"note {d.number}, round {n}" for d in docs}
                                                        for n in (1, 2)]


async def test_a_selector_holds_its_notes_costs_as_numbers_not_their_index_lines():
    import tracemalloc

    refs = [NoteRef(str(i), f"T{i}", f"Ann Lee met Bob Stone in Oslo on day {i}; the ship {i % 7} sailed.")
            for i in range(4_000)]
    selector = NotesSelector(refs, 300)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        choice = await selector.select("Who met in Oslo?", exclude="5")
        selector._bm25 = None  # the ranking's postings are the index's (bench_engine select measures them)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert choice.listed and "<notes_index>" in choice.text and '"5"' not in choice.text
    # the costs (8 B a note each) and the positions by key (70 B); the index lines were 170 B a note more
    assert held < 4_000 * 100, f"{held:,} B for 4,000 notes: the index lines were kept (56 B and a string each)"


def test_spooled_notes_are_written_a_note_at_a_time_and_put_in_the_order_asked():
    from r3con.notes.keyed import SpooledNotes

    spooled = SpooledNotes()
    for key, text in (("3", "third"), ("1", ""), ("2", "second"), ("3", "third, again")):  # as reads return
        spooled.add(key, text)
    ordered = spooled.ordered(["1", "2", "3", "4"])
    assert list(ordered) == ["1", "2", "3"] and dict(ordered) == {"1": "", "2": "second", "3": "third, again"}
    assert [ordered.has_note(k) for k in ("1", "2", "3", "4")] == [False, True, True, False]


def test_a_rounds_notes_are_held_beside_the_parts_places_and_ordered_without_a_copy_when_in_order():
    from r3con.corpus.places import Parts
    from r3con.notes.keyed import KeyedBytes, SpooledNotes

    parts = Parts(Document(number=n, title=f"T{n}", text="") for n in (1, 2, 3))
    written = SpooledNotes(places=parts.places)
    for key in ("3", "1", "2"):  # as the reads return
        written.add(key, f"note {key}")
    assert written._where.places is parts.places and list(written) == ["1", "2", "3"], "the parts' order, their dict"
    assert written.ordered([p.key for p in parts]) is written, "in corpus order already: these very notes"
    some = SpooledNotes({"3": "c", "1": "a"}, places=parts.places).ordered(["3", "2", "1"])  # another order: a copy
    assert list(some) == ["3", "1"] and dict(some) == {"3": "c", "1": "a"} and some._where.places is not parts.places
    written.add("elsewhere", "a key the parts lack")  # after them; the parts' places are never added to
    assert list(written)[-1] == "elsewhere" and "elsewhere" not in parts.places and written["elsewhere"].startswith("a key")
    store = KeyedBytes(parts.places)
    store.put("2", b"two")
    assert store._where.places is parts.places and store.pop("2") == b"two" and "2" not in store and len(store) == 0


async def test_note_refs_are_made_when_read_and_equal_the_list_of_them():
    import pickle

    from r3con.notes.keyed import SpooledNotes
    from r3con.notes.selection import NoteRefs, note_refs

    docs = [Document(number=i, title=f"T{i}", text="") for i in range(1, 9)]
    notes = SpooledNotes({d.key: "" if d.number % 3 == 0 else f"note on {d.number}" for d in docs})
    refs = NoteRefs(docs, notes)
    assert list(refs) == note_refs(docs, notes) and len(refs) == 6 and refs[1:3] == note_refs(docs, notes)[1:3]
    assert list(refs.labels()) == [r.label for r in note_refs(docs, notes)]
    assert list(refs.without({0, 5})) == note_refs(docs, notes)[1:5]
    assert pickle.loads(pickle.dumps(refs)) == tuple(note_refs(docs, notes))  # to a worker, as the notes
    lazy, listed = NotesSelector(refs, 20), NotesSelector(note_refs(docs, notes), 20)
    for key in ("1", "4", None):
        assert await lazy.select("note on 4", exclude=key) == await listed.select("note on 4", exclude=key)


async def test_a_choice_reads_each_note_back_once_and_none_for_its_keys(monkeypatch):
    from r3con.notes.keyed import SpooledNotes
    from r3con.notes.selection import NoteRefs, note_refs

    docs = [Document(number=i, title=f"T{i}", text="") for i in range(1, 301)]
    notes = SpooledNotes({d.key: f"Ann met Bob on day {d.number} in {'Oslo' if d.number % 4 else 'Lima'}." for d in docs})
    read: list[str] = []
    real = SpooledNotes.__getitem__
    monkeypatch.setattr(SpooledNotes, "__getitem__", lambda self, key: read.append(key) or real(self, key))
    listed = NotesSelector(note_refs(docs, dict(notes)), 300)
    expected = [await listed.select("Who met in Lima?", exclude=k, compact=True) for k in ("4", "8")]
    refs = NoteRefs(docs, notes)
    lazy = NotesSelector(refs, 300)
    for key, want in zip(("4", "8"), expected, strict=True):
        choice = await lazy.select("Who met in Lima?", exclude=key, compact=True)
        read.clear()
        assert lazy.keys_of(choice.picks) == (want_keys := listed.keys_of(want.picks)) and read == [], \
            "a choice's keys are its documents' keys: no note is read back for them"
        assert want_keys[0] and want_keys[1], "the choice shows notes in full and as index lines"
        assert lazy.filled(choice) == listed.filled(want)
        assert sorted(read) == sorted(set(read)), "each note shown read back once"
        read.clear()
        assert lazy.filled(choice).text == listed.filled(want).text and read == [], "read again from the recent ones"
    first = [r.text for r in note_refs(docs, dict(notes))[:30]]
    small = NoteRefs(docs, notes)
    small.RECENT = 10
    read.clear()
    assert [r.text for r in small[:30]] == first and len(read) == 30
    assert len(small._recent) == 10 and [r.text for r in small[20:30]] == first[20:] and len(read) == 30, \
        "the last ten read are kept, no more"


async def test_final_notes_chosen_elsewhere_are_the_choice_and_head_made_here_and_no_index_is_built_here():
    docs = [Document(number=i, title=f"T{i}", text="") for i in range(1, 80)]
    notes = {d.key: f"Ann Lee met Bob Stone in Oslo on day {d.number}; the ship {d.number % 7} sailed." for d in docs}
    for budget in (300, 900, 10**6):
        here = await FinalNotes.of("Who met in Oslo?", docs, notes, budget)
        elsewhere = SelectsElsewhere()
        there = await FinalNotes.of("Who met in Oslo?", docs, notes, budget, selects=elsewhere)
        assert there.choice == here.choice and there.per_document == here.per_document
        if not here.per_document:
            assert elsewhere.made == 0, "every note fits: nothing to rank, nothing sent"
            continue
        assert elsewhere.made == 2 and there.selector._bm25 is None, "ranked there, not here"
        assert (await there.head()).keys == (await here.head()).keys
        assert [await there.for_document(k) for k in ("1", "40")] == [await here.for_document(k) for k in ("1", "40")]


async def test_a_selector_over_a_note_for_every_part_finds_a_notes_place_in_the_parts_places():
    from r3con.corpus.places import Parts
    from r3con.notes.keyed import SpooledNotes
    from r3con.notes.selection import NoteRefs

    parts = Parts(Document(number=n, title=f"T{n}", text="") for n in (5, 1, 3))
    notes = SpooledNotes({p.key: f"Ann met Bob on day {p.number}." for p in parts})
    selector = NotesSelector(NoteRefs(parts, notes), 200)
    choice = await selector.select("Who met Bob?", exclude="1")
    assert selector._at is parts.places and '"1"' not in choice.text and '"5"' in choice.text
    some = NotesSelector(NoteRefs(parts, {"5": "a note", "3": "another"}), 200)  # a part without one: its own map
    await some.select("Who?", exclude="3")
    assert some._at == {"5": 0, "3": 1}


async def test_a_choice_is_joined_from_pieces_kept_within_their_bound_and_reads_as_formatted():
    """Each note's text in full and as an index line is made once and kept up to a bound; a selector whose
    pieces are let go after nearly every note makes the same texts as one that keeps them all."""
    import random

    from r3con.notes.fragments import Fragments, format_index, index_line

    rng = random.Random(5)
    words = 'Ann Bob ship "storm" harbour a&b 12.5% \u6536\u5165 Whitby letter'.split()
    refs = [NoteRef(str(i), f'T{i} "q" & <x>\nline', " ".join(rng.choices(words, k=rng.randrange(1, 30))))
            for i in range(1, 400)]
    pieces = Fragments(refs)
    pieces.KEPT_CHARS = 500  # a few pieces at a time
    for _ in range(30):
        chosen = rng.sample(range(len(refs)), rng.randrange(1, 40))
        assert pieces.notes(chosen) == format_notes([refs[i] for i in chosen])
        assert pieces.index(chosen, 2) == format_index([index_line(refs[i]) for i in chosen], 2)
    assert all(sum(map(len, kept.pieces.values())) <= 500 for kept in pieces._kept)
    kept, small = NotesSelector(refs, 900), NotesSelector(refs, 900)
    small._fragments.KEPT_CHARS = 300
    for query, exclude in [("Ann storm", "3"), ("harbour letter", None), ("Whitby", "399"), ("Ann storm", "3")]:
        want = await kept.select(query, exclude=exclude)
        assert want.selected and await small.select(query, exclude=exclude) == want
        assert kept.filled(await kept.select(query, exclude=exclude, compact=True)) == want
