import asyncio
import dataclasses
import re

from r3con.corpus.documents import documents_from_texts
from r3con.errors import ProviderError
from r3con.notes.selection import NotesSelector
from r3con.stages.plan import Placement
from r3con.stages.relevance import RelevanceOptions, extract_relevance, parse_note, reread

from ..fakes import ScriptedLLM, SelectsElsewhere, document_number, user_text

DOCS = documents_from_texts([("Alpha report", "Alpha text."), ("Beta letter", "Beta text."), ("Gamma memo", "Gamma text.")])


def note_for(request):
    n = document_number(request)
    return "NONE" if n == 3 and request.round == 1 else f"note {n} r{request.round}"


async def test_round_one_reads_each_document_once_with_the_task():
    llm = ScriptedLLM({"relevance": note_for})
    result = await extract_relevance(llm, "Who met whom?", DOCS, RelevanceOptions(rounds=1))
    assert sorted(r.doc for r in llm.history) == [1, 2, 3]
    assert all("<task>\nWho met whom?\n</task>" in user_text(r) for r in llm.history)
    assert all("<notes>" not in user_text(r) for r in llm.history)
    assert dict(result.final) == {"1": "note 1 r1", "2": "note 2 r1", "3": ""}


async def test_round_two_excludes_own_note_and_labels_the_others():
    llm = ScriptedLLM({"relevance": note_for})
    result = await extract_relevance(llm, "Who met whom?", DOCS, RelevanceOptions(rounds=2))
    round2 = [r for r in llm.history if r.round == 2]
    assert len(round2) == 3
    for request in round2:
        text = user_text(request)
        own = request.doc
        notes = re.findall(r'<note document="(\d+)" title="([^"]*)">\n(.*?)\n</note>', text)
        others = {int(n): (title, body) for n, title, body in notes}
        assert own not in others, "a document must not see its own previous note"
        # document 3 was irrelevant in round 1 (empty note), so it is not offered to others
        expected = {1, 2} - {own}
        assert set(others) == expected
        for n in expected:
            assert others[n] == (DOCS[n - 1].title, f"note {n} r1")
    assert dict(result.final) == {"1": "note 1 r2", "2": "note 2 r2", "3": "note 3 r2"}
    assert len(result.rounds) == 2


async def test_reread_calls_only_the_readers_each_with_every_other_documents_note():
    llm = ScriptedLLM({"relevance": note_for})
    notes = {"1": "note 1 r1", "2": "", "3": "note 3 r1"}
    result = await reread(llm, "Who met whom?", DOCS, notes, [DOCS[0]], 2, RelevanceOptions())
    assert [(r.doc, r.round) for r in llm.history] == [(1, 2)]
    seen = re.findall(r'<note document="(\d+)"', user_text(llm.history[0]))
    assert seen == ["3"] and dict(result) == {"1": "note 1 r2"}


async def test_rounds_are_barriers():
    llm = ScriptedLLM({"relevance": note_for})
    await extract_relevance(llm, "t", DOCS, RelevanceOptions(rounds=3))
    rounds = [r.round for r in llm.history]
    assert rounds == sorted(rounds), "no round may start before the previous one finished"


async def test_rounds_send_their_calls_in_alternating_directions_and_keep_corpus_order():
    llm = ScriptedLLM({"relevance": note_for})
    result = await extract_relevance(llm, "t", DOCS, RelevanceOptions(rounds=3))
    sent = {n: [r.doc for r in llm.history if r.round == n] for n in (1, 2, 3)}
    # round 2 starts with the documents round 1 sent last, whose prefixes a bounded LRU cache still holds
    assert sent == {1: [1, 2, 3], 2: [3, 2, 1], 3: [1, 2, 3]}
    assert list(result.final) == ["1", "2", "3"] and list(result.rounds[1]) == ["1", "2", "3"]


async def test_zero_rounds_makes_no_call():
    llm = ScriptedLLM({"relevance": note_for})
    result = await extract_relevance(llm, "t", DOCS, RelevanceOptions(rounds=0))
    assert llm.history == [] and result.rounds == () and dict(result.final) == {}


async def test_failing_document_is_recorded_and_round_goes_on():
    def flaky(request):
        if document_number(request) == 2:
            return ProviderError("HTTP 500: boom", status=500)
        return note_for(request)

    llm = ScriptedLLM({"relevance": flaky})
    result = await extract_relevance(llm, "t", DOCS, RelevanceOptions(rounds=2))
    assert [(f.stage, f.doc) for f in result.failures] == [("relevance", "2"), ("relevance", "2")]
    assert "boom" in result.failures[0].error
    assert dict(result.final) == {"1": "note 1 r2", "3": "note 3 r2"}


async def test_cache_layout_shares_the_document_prefix_across_rounds():
    llm = ScriptedLLM({"relevance": note_for})
    # shared_first off: these documents are shorter than the notes, which would otherwise go first
    await extract_relevance(llm, "t", DOCS, RelevanceOptions(rounds=2, placement=Placement(shared_first=False)))
    by_doc = {}
    for r in llm.history:
        by_doc.setdefault(r.doc, []).append(r.messages[0].content + r.messages[1].content)
    for texts in by_doc.values():
        first, second = texts
        prefix = first.split("</document>")[0]
        assert second.startswith(prefix)


def test_parse_note_recognises_none():
    assert parse_note("NONE") == "" and parse_note(" none. ") == "" and parse_note("**NONE**") == ""
    assert parse_note("Nonetheless, X met Y.") == "Nonetheless, X met Y."


def document_leads(request) -> bool:
    """Whether the call's user message begins with its document (the cache layout's default)."""
    return request.messages[1].content.startswith("<document")


class ForgetfulCache(ScriptedLLM):
    """Reports the system message as cached on every call, and a document only if `keeps(doc)` (and it leads)."""

    def __init__(self, keeps):
        super().__init__({"relevance": lambda r: f"note {document_number(r)} on shared matters"})
        self.keeps = keeps

    async def complete(self, request):
        completion = await super().complete(request)
        leads = document_leads(request)
        prompt = completion.usage.prompt_tokens
        cached = prompt - 40 if leads and request.round and request.round > 1 and self.keeps(request.doc) else 20
        return dataclasses.replace(completion, usage=dataclasses.replace(completion.usage, cached_tokens=cached))


# longer than every other document's note is expected to be (`plan.expected_shared`): round 1 reads them first
LONG = documents_from_texts([(f"Doc {i}", f"Doc {i} says the shared matter was settled. " * 200) for i in range(1, 11)])


async def test_round_two_puts_the_notes_first_for_documents_the_cache_no_longer_holds():
    llm = ForgetfulCache(keeps=lambda doc: doc >= 6)  # round 2 goes backwards: documents 10..6 come first
    result = await extract_relevance(llm, "the shared matter", LONG, RelevanceOptions(rounds=2))
    round2 = [r for r in llm.history if r.round == 2]
    placed = result.cache.rounds[0]
    assert all(document_leads(r) for r in round2[:placed.probes]), "the first calls out (probes) keep it first"
    assert 0 < placed.kept < placed.probes, "the probes saw some documents kept and some lost"
    rest = {r.doc: document_leads(r) for r in round2[placed.probes:]}
    assert any(rest.values()) and not all(rest.values())
    assert all(lead for doc, lead in rest.items() if doc >= 8), "the documents sent first keep theirs first"
    assert not any(lead for doc, lead in rest.items() if doc <= 3), "those sent last put the notes first"
    assert result.cache.cold(), "population will put its shared part first"


async def test_without_reported_cached_tokens_every_call_keeps_its_document_first():
    class Silent(ForgetfulCache):
        async def complete(self, request):
            return await ScriptedLLM.complete(self, request)

    llm = Silent(keeps=lambda doc: False)
    result = await extract_relevance(llm, "the shared matter", LONG, RelevanceOptions(rounds=2))
    assert all(document_leads(r) for r in llm.history)
    assert result.cache.rounds[0].document_first == 10 and not result.cache.cold()


async def test_a_cache_that_keeps_every_document_changes_nothing():
    short = [(f"Short {i}", "Tin.") for i in range(1, 7)]  # shorter than the notes: the notes lead them
    long = [(f"Long {i}", f"Long {i} says the shared matter was settled. " * 200) for i in range(1, 7)]
    docs = documents_from_texts(short + long)
    llm = ForgetfulCache(keeps=lambda doc: True)
    result = await extract_relevance(llm, "the shared matter", docs, RelevanceOptions(rounds=2))
    round2 = {r.doc: document_leads(r) for r in llm.history if r.round == 2}
    assert round2 == {d.number: d.title.startswith("Long") for d in docs}, "long documents first, short ones after"
    assert not result.cache.cold()


async def test_choices_made_elsewhere_are_sent_as_made_here_and_the_stage_ranks_nothing_itself(monkeypatch):
    docs = documents_from_texts([(f"Memo {i}", f"text {i}") for i in range(12)])
    options = RelevanceOptions(rounds=3, notes_budget=120, top=2)

    def note(request):
        n = document_number(request)
        return f"Memo {n} says Ann met Bob {'in Oslo' if n % 3 else 'at sea'} on day {n} of round {request.round}."

    here = ScriptedLLM({"relevance": note})
    expected = await extract_relevance(here, "Where did Ann meet Bob?", docs, options)
    ranked: list[str] = []

    class Driver(NotesSelector):  # the stage's own selector: it must not rank while the round is planned
        async def _scores(self, query):
            ranked.append(query)
            return await super()._scores(query)

    monkeypatch.setattr("r3con.stages.relevance.NotesSelector", Driver)
    elsewhere, there = SelectsElsewhere(), ScriptedLLM({"relevance": note})
    result = await extract_relevance(there, "Where did Ann meet Bob?", docs,
                                     dataclasses.replace(options, selects=elsewhere))
    assert expected.selections.selected == 24, "the budget applied in rounds 2 and 3"
    assert [user_text(r) for r in there.history] == [user_text(r) for r in here.history]
    assert [list(r) for r in result.shown] == [list(r) for r in expected.shown] and result.rounds == expected.rounds
    assert any(s.top for r in result.shown for s in r), "the notes that rank first came back too"
    assert elsewhere.made == 24 and ranked == []


async def test_calls_that_lead_with_their_notes_go_out_in_one_chain_a_slot_each_runs_in_order():
    class Slow(ScriptedLLM):  # replies take a moment: calls sent side by side overlap
        running = {1: 0, 2: 0}
        peak = {1: 0, 2: 0}

        async def complete(self, request):
            Slow.running[request.round] += 1
            Slow.peak[request.round] = max(Slow.peak[request.round], Slow.running[request.round])
            await asyncio.sleep(0.002)
            Slow.running[request.round] -= 1
            return await super().complete(request)

    docs = documents_from_texts([(f"Tin {i}", "Tin.") for i in range(1, 9)])  # shorter than the notes: they lead
    llm = Slow({"relevance": lambda r: f"note {document_number(r)} on the shared matter"})
    await extract_relevance(llm, "t", docs, RelevanceOptions(rounds=2, streams=2, in_flight=16))
    round2 = [r.doc for r in llm.history if r.round == 2]
    assert sorted(round2) == list(range(1, 9)) and round2[:2] == [8, 4], "two chains: 8..5 and 4..1, side by side"
    assert [d for d in round2 if d > 4] == [8, 7, 6, 5] and [d for d in round2 if d <= 4] == [4, 3, 2, 1]
    assert Slow.peak == {1: 8, 2: 2}, "round 1 (no notes to share) is not chained"
