import json

from r3con.corpus.documents import Document, documents_from_texts
from r3con.errors import ContextTooLong
from r3con.notes.final import FinalNotes
from r3con.stages.plan import Placement
from r3con.stages.populate import PopulateOptions, RecordLimits, populate
from r3con.stages.schema import validate_schema

from ..fakes import SIMPLE_SCHEMA, ScriptedLLM, SelectsElsewhere, document_number, quote

SCHEMA = validate_schema(SIMPLE_SCHEMA)
DOCS = documents_from_texts([("One", "Ann is 4."), ("Two", "Bob is 7.")])


def records(request):
    n = document_number(request)
    return json.dumps({"people": [{"_passage": quote(request), "name": ["Ann", "Bob"][n - 1], "age": [4, 7][n - 1]}]})


async def test_records_are_stamped_with_their_source_and_merged():
    llm = ScriptedLLM({"populate": records})
    result = await populate(llm, "ages", SCHEMA, DOCS, "<notes/>")
    assert list(result.tables["people"]) == [
        {"name": "Ann", "age": 4, "_id": "R1.1.1", "_doc": 1, "_title": "One", "_passage": "Ann is 4.",
         "_span": [0, 9], "_match": "exact"},
        {"name": "Bob", "age": 7, "_id": "R2.1.1", "_doc": 2, "_title": "Two", "_passage": "Bob is 7.",
         "_span": [0, 9], "_match": "exact"},
    ]
    assert dict(result.per_doc) == {"1": 1, "2": 1}
    sent = llm.history[0].response_schema["properties"]["people"]["items"]
    assert list(sent["properties"])[0] == "_passage" and sent["required"] == ["_passage", "name"]
    assert result.evidence.to_dict()["share"] == 1.0
    assert sorted(r.doc for r in llm.history) == [1, 2]


async def test_reverse_sends_the_calls_backwards_and_still_merges_in_corpus_order():
    llm = ScriptedLLM({"populate": records})
    result = await populate(llm, "ages", SCHEMA, DOCS, "<notes/>", PopulateOptions(reverse=True))
    assert [r.doc for r in llm.history] == [2, 1]
    assert [row["_doc"] for row in result.tables["people"]] == [1, 2] and list(result.per_doc) == ["1", "2"]


async def test_split_parts_are_stamped_with_their_part():
    doc = Document(number=5, title="Long", text="Ann is 4.", part=2, parts=3, offset=100)
    llm = ScriptedLLM({"populate": lambda r: json.dumps({"people": [{"name": "Ann", "_passage": "is 4"}]})})
    result = await populate(llm, "ages", SCHEMA, [doc], "")
    record = result.tables["people"][0]
    assert record["_doc"] == 5 and record["_part"] == 2 and record["_id"] == "R5.2.1"
    assert record["_span"] == [104, 108], "spans point into the whole document, not the part"
    assert llm.history[0].part == 2


async def test_invalid_output_is_reasked_with_the_error():
    replies = iter([json.dumps({"people": [{"age": "four"}]}),
                    json.dumps({"people": [{"name": "Ann", "age": 4, "_passage": "Ann is 4."}]})])
    llm = ScriptedLLM({"populate": lambda r: next(replies)})
    result = await populate(llm, "ages", SCHEMA, DOCS[:1], "")
    assert result.tables["people"][0]["name"] == "Ann"
    assert result.reasked == 1
    retry = llm.history[1].messages[-1].content
    assert "does not match the schema" in retry and "name" in retry


async def test_broken_json_is_repaired_without_reasking():
    llm = ScriptedLLM({"populate": lambda r: 'Sure!\n```json\n{"people": [{"name": "Ann", "age": 4, "_passage": "Ann is 4."},]\n```'})
    result = await populate(llm, "ages", SCHEMA, DOCS[:1], "")
    assert result.tables["people"][0]["name"] == "Ann"
    assert result.repaired == 1 and len(llm.history) == 1


async def test_a_document_that_never_validates_is_a_failure_not_a_crash():
    def reply(request):
        return records(request) if document_number(request) == 1 else "I cannot help with that."

    llm = ScriptedLLM({"populate": reply})
    result = await populate(llm, "ages", SCHEMA, DOCS, "", PopulateOptions(attempts=2))
    assert [r["name"] for r in result.tables["people"]] == ["Ann"]
    assert [(f.stage, f.doc) for f in result.failures] == [("populate", "2")]
    assert len(llm.history) == 3


async def test_notes_are_background_and_document_is_the_source():
    llm = ScriptedLLM({"populate": records})
    notes = "<notes>\nBob is Ann's brother\n</notes>"
    await populate(llm, "ages", SCHEMA, DOCS[:1], notes, PopulateOptions(placement=Placement(shared_first=False)))
    text = llm.history[0].messages[1].content
    assert text.index("<document") < text.index("<schema>") < text.index("Bob is Ann's brother")
    assert text.count("the document above") == 2

    await populate(llm, "ages", SCHEMA, DOCS[:1], notes)  # a document shorter than task, schema and notes
    text = llm.history[1].messages[1].content
    assert text.index("<schema>") < text.index("Bob is Ann's brother") < text.index("<document")
    assert text.count("the document below") == 2 and "above" not in text


def _invented_then(second: str):
    """Replies: first a record whose passage is not in the document, then `second` when re-asked."""
    replies = iter([json.dumps({"people": [{"name": "Ann", "_passage": "Ann is 4."},
                                           {"name": "Zed", "_passage": "Zed is 99 and lives on the moon."}]}), second])
    return lambda request: next(replies)


async def test_a_record_whose_passage_is_not_in_the_document_is_reasked_once_then_kept_flagged():
    still_invented = json.dumps({"people": [{"name": "Ann", "_passage": "Ann is 4."},
                                            {"name": "Zed", "_passage": "Zed is 99, on the moon."}]})
    llm = ScriptedLLM({"populate": _invented_then(still_invented)})
    result = await populate(llm, "ages", SCHEMA, DOCS[:1], "")
    assert len(llm.history) == 2
    reask = llm.history[1].messages[-1].content
    assert "Zed is 99 and lives on the moon." in reask and "Ann is 4." not in reask
    assert llm.history[1].messages[-2].role == "assistant"  # the same conversation, the document's prefix kept
    ann, zed = result.tables["people"]
    assert (ann["_match"], zed["_match"], zed["_span"]) == ("exact", "none", None)
    stats = result.evidence.to_dict()
    assert stats["records"] == 2 and stats["verified"] == 1 and stats["share"] == 0.5
    assert zed["_ungrounded"] == ["name"] and "_ungrounded" not in ann  # no Zed in the document either
    assert stats["by_doc"] == {"1": {"records": 2, "verified": 1, "mismatch": 0, "ungrounded": 1, "share": 0.5}}
    assert stats["reasked_documents"] == 1 and stats["ungrounded"] == 1


async def test_a_reask_that_corrects_the_passage_verifies_the_record():
    fixed = json.dumps({"people": [{"name": "Ann", "_passage": "Ann is 4."}]})
    llm = ScriptedLLM({"populate": _invented_then(fixed)})
    result = await populate(llm, "ages", SCHEMA, DOCS[:1], "")
    assert [r["name"] for r in result.tables["people"]] == ["Ann"] and result.evidence.share == 1.0


async def test_keep_flags_without_reasking_and_drop_lists_what_it_left_out():
    llm = ScriptedLLM({"populate": _invented_then("unused")})
    kept = await populate(llm, "ages", SCHEMA, DOCS[:1], "", PopulateOptions(unverified="keep"))
    assert len(llm.history) == 1 and [r["_match"] for r in kept.tables["people"]] == ["exact", "none"]

    llm = ScriptedLLM({"populate": _invented_then("unused")})
    dropped = await populate(llm, "ages", SCHEMA, DOCS[:1], "", PopulateOptions(unverified="drop"))
    assert len(llm.history) == 1 and [r["name"] for r in dropped.tables["people"]] == ["Ann"]
    assert [(r["name"], r["_table"], r["_id"]) for r in dropped.dropped] == [("Zed", "people", "R1.1.2")]
    assert dropped.evidence.records == 2 and dropped.evidence.dropped == 1 and dropped.per_doc["1"] == 1


async def test_a_record_without_a_passage_is_valid_but_unverified():
    llm = ScriptedLLM({"populate": lambda r: json.dumps({"people": [{"name": "Ann"}]})})
    result = await populate(llm, "ages", SCHEMA, DOCS[:1], "", PopulateOptions(unverified="keep"))
    record = result.tables["people"][0]
    assert record["_passage"] is None and record["_match"] == "none" and record["_id"] == "R1.1.1"


async def test_a_reask_that_fails_keeps_the_first_records_flagged():
    replies = iter([json.dumps({"people": [{"name": "Zed", "_passage": "Zed lives on the moon."}]}),
                    ContextTooLong("the conversation grew past the window")])
    llm = ScriptedLLM({"populate": lambda r: next(replies)})
    result = await populate(llm, "ages", SCHEMA, DOCS[:1], "")
    assert not result.failures and [r["_match"] for r in result.tables["people"]] == ["none"]
    assert result.evidence.reasked == 1


async def test_a_record_over_the_limits_degrades_its_document_with_the_reason_and_is_not_reasked():
    def reply(request):
        if document_number(request) == 1:
            return records(request)
        wide = {"_passage": quote(request), "name": "Bob", "age": 7, **{f"f{i}": i for i in range(100_000)}}
        return json.dumps({"people": [wide]})

    llm = ScriptedLLM({"populate": reply})
    result = await populate(llm, "ages", SCHEMA, DOCS, "", PopulateOptions(attempts=3))
    assert [r["name"] for r in result.tables["people"]] == ["Ann"]
    (failure,) = result.failures
    assert failure.doc == "2" and f"record 1 of 'people' has 100,003 fields, more than the {RecordLimits.of().fields}" in failure.error
    assert len(llm.history) == 2, "a reply over the limits is not asked again"

    long_value = ScriptedLLM({"populate": lambda r: json.dumps({"people": [
        {"_passage": quote(r), "name": "x" * (RecordLimits.of().value_chars + 1), "age": 1}]})})
    result = await populate(long_value, "ages", SCHEMA, DOCS[:1], "")
    assert "field 'name' of record 1 of 'people' holds 20,001 characters" in result.failures[0].error


async def test_the_record_limits_are_settings_a_lower_one_degrades_naming_it_and_a_higher_one_keeps_the_record():
    def reply(request):
        rows = [{"_passage": quote(request), "name": "x" * 25_000, "age": 1}, *json.loads(records(request))["people"]]
        return json.dumps({"people": rows})

    llm = ScriptedLLM({"populate": reply})
    kept = await populate(llm, "ages", SCHEMA, DOCS[:1], "",
                          PopulateOptions(limits=RecordLimits(records=2_000, fields=256, value_chars=30_000)))
    assert not kept.failures and len(kept.tables["people"]) == 2, "raised, the limit keeps the long value"
    for limits, said in [(RecordLimits.of(), "holds 25,000 characters, more than the 20,000 a value may take "
                                             "(R3CON_MAX_VALUE_CHARS)"),
                         (RecordLimits(records=1, fields=256, value_chars=30_000),
                          "2 records, more than the 1 one document part may yield (R3CON_MAX_RECORDS)"),
                         (RecordLimits(records=2_000, fields=2, value_chars=30_000),
                          "has 3 fields, more than the 2 a record may have (R3CON_MAX_RECORD_FIELDS)")]:
        (failure,) = (await populate(llm, "ages", SCHEMA, DOCS[:1], "", PopulateOptions(limits=limits))).failures
        assert said in failure.error, failure.error


FINAL = {"1": "Ann sails into Whitby harbour on a storm-tossed schooner.",
         "2": "Bob climbs the abbey steps and counts the graves.",
         "3": "Cid, the harbour master, logs the schooner's wreck.",
         "4": "Dee keeps the abbey's keys and its ledger of graves."}  # the fifth document has no note
FIVE = documents_from_texts([("One", "Ann is 4."), ("Two", "Bob is 7."), ("Three", "Cid is 50."),
                             ("Four", "Dee is 60."), ("Five", "Eve is 9.")])


def _anyone(request):
    return json.dumps({"people": [{"_passage": quote(request), "name": "someone"}]})


def _notes_of(request) -> str:
    text = request.messages[1].content
    return text[text.index("<notes>"):text.rindex("</notes")]


async def test_notes_that_do_not_fit_are_the_tasks_first_then_each_documents_own_and_all_of_them_when_they_fit():
    llm = ScriptedLLM({"populate": _anyone})
    final = await FinalNotes.of("Who was at Whitby?", FIVE, FINAL, budget=100)  # about three notes in full
    assert final.per_document
    result = await populate(llm, "Who was at Whitby?", SCHEMA, [FIVE[0], FIVE[1], FIVE[4]], final)
    sent = {r.doc: _notes_of(r) for r in llm.history}
    first = '<notes>\n<note document="1" title="One">\nAnn sails'  # the note that ranks first for the task
    assert all(text.startswith(first) for text in sent.values()), "every call is shown it first"
    assert "Cid, the harbour master" in sent[1] and "Bob climbs" not in sent[1]  # ranked for Ann's own note
    assert "Bob climbs" in sent[2] and "Cid, the harbour master" not in sent[2]
    assert "Bob climbs" not in sent[5] and "Cid" not in sent[5], "a document without a note: the first part alone"
    assert [(s.doc, s.full) for s in result.shown] == [("1", ("1", "3")), ("2", ("1", "2")), ("5", ("1",))]

    every = await FinalNotes.of("Who was at Whitby?", FIVE, FINAL, budget=None)
    assert not every.per_document
    llm = ScriptedLLM({"populate": _anyone})
    result = await populate(llm, "Who was at Whitby?", SCHEMA, FIVE[:2], every)
    texts = [_notes_of(r) for r in llm.history]
    assert texts[0] == texts[1] and all(note in texts[0] for note in FINAL.values()) and len(result.shown) == 0


async def test_each_documents_own_notes_chosen_elsewhere_are_those_chosen_here():
    here = ScriptedLLM({"populate": _anyone})
    final = await FinalNotes.of("Who was at Whitby?", FIVE, FINAL, budget=100)
    expected = await populate(here, "Who was at Whitby?", SCHEMA, FIVE, final)
    elsewhere, there = SelectsElsewhere(), ScriptedLLM({"populate": _anyone})
    final = await FinalNotes.of("Who was at Whitby?", FIVE, FINAL, budget=100)
    result = await populate(there, "Who was at Whitby?", SCHEMA, FIVE, final,
                            PopulateOptions(selects=elsewhere))
    assert [r.messages for r in there.history] == [r.messages for r in here.history]
    assert list(result.shown) == list(expected.shown) and result.tables == expected.tables
    assert elsewhere.made == 4, "the four documents with a note; the fifth is shown the first part alone"
    assert (await final.head()).rest._bm25 is None, "no index of the notes past the head was built here"
