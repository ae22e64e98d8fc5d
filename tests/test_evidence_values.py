"""Values, not just words: a passage that aligns with its document but differs in a number, date, negation
or name is a `mismatch` naming the difference; copy noise that keeps the meaning is still verified."""

from decimal import Decimal

import pytest

from r3con.evidence._values import Numbers, stated, tokens
from r3con.evidence.citations import DocEvidence, EvidenceStats, verify
from r3con.evidence.grounding import Source, dates, field_grounded, ungrounded, unsupported_numbers

LOG = ("On 6 July we finished taking in cargo, silver sand and boxes of earth. The company sold 4,200 units "
       "in 1897 for a total of 1,250,000 crowns. The captain did not know what the cargo was. Mr. Petrofsky "
       "was missing on 16 July at 10:30 p.m., and revenue rose 5.2% to $4.2 million in the third quarter. "
       "Nobody on board had seen him since the Demeter left Varna.")
REPORT = ("|项目|2024年3月31日|2023年12月31日|\n|营业收入（元）|1,065,150,876.00|1,200,095,568.76|-11.24%|\n"
          "本季度合并及公司财务报表未经审计，审计机构未出具审计报告。公司不存在重大诉讼事项。单位：万元。飞亚达股份有限公司持有38,770万元存款。")


def _differences(passage: str, text: str = LOG) -> list[tuple[str, str, str]]:
    verdict = verify(passage, text)
    assert verdict.match is not None, "the passage aligns with the document"
    return [(d.kind, d.document, d.record) for d in verdict.differences]


@pytest.mark.parametrize(("passage", "expected"), [
    ("The company sold 4,800 units in 1897 for a total of 1,250,000 crowns.", ("number", "4,200", "4,800")),
    ("The company sold 4,200 units in 1898 for a total of 1,250,000 crowns.", ("number", "1897", "1898")),
    ("The company sold 4,200 units in 1897 for a total of 1,750,000 crowns.", ("number", "1,250,000", "1,750,000")),
    ("The captain did know what the cargo was.", ("negation", "not", "")),
    ("The company never sold 4,200 units in 1897 for a total of 1,250,000 crowns.", ("negation", "", "never")),
    ("Mr. Petrofsky was missing on 16 June at 10:30 p.m., and revenue rose", ("date", "July", "June")),
    ("was missing on 16 July at 11:30 p.m., and revenue rose 5.2% to $4.2 million", ("date", "10:30 p.m.", "11:30 p.m.")),
    ("and revenue rose 5.7% to $4.2 million in the third quarter.", ("number", "5.2%", "5.7%")),
    ("and revenue rose 5.2% to $4.2 billion in the third quarter.", ("number", "4.2 million", "4.2 billion")),
    ("and revenue fell 5.2% to $4.2 million in the third quarter.", ("direction", "rose", "fell")),
    ("Nobody on board had seen him since the Demeter left Whitby.", ("name", "Varna", "Whitby")),
    ("The company sold 4,200 tons in 1897 for a total of 1,250,000 crowns.", ("unit", "units", "tons")),
])
def test_a_passage_that_differs_in_a_value_is_a_mismatch_naming_the_difference(passage, expected):
    assert verify(passage, LOG).outcome == "mismatch"
    assert expected in _differences(passage)


@pytest.mark.parametrize("passage", [
    "The company sold 4,200 units in 1897 for a total of 1 250 000 crowns.",  # the same number, grouped otherwise
    "The company sold 4,200 units in 1897 for a total of 1250000 crowns.",
    "the captain did NOT know what the cargo was.",  # case
    "The captain didn't know what the cargo was.",  # a contraction
    "The   captain did not\nknow what the cargo was.",  # white space
    "and revenue rose 5.2 per cent to $4.2 million in the third quarter.",
    "and revenue rose 5.2% to $4,200,000 in the third quarter.",  # the same amount, scale written out
    "On 6 July we finished taking in cargo ... boxes of earth.",  # an elision
    "The company sold 4,200 units in 1897 for total of 1,250,000 crowns.",  # a function word dropped
    "Nobody on board had seen him since Demeter left Varna.",
])
def test_copy_noise_that_keeps_the_meaning_is_verified(passage):
    verdict = verify(passage, LOG)
    assert verdict.outcome in ("exact", "tolerant", "fuzzy") and verdict.differences == ()


def test_cjk_values_negations_and_terms():
    dropped = "本季度合并及公司财务报表经审计，审计机构未出具审计报告。"  # the first 未 dropped
    assert verify(dropped, REPORT).outcome == "mismatch" and ("negation", "未", "") in _differences(dropped, REPORT)
    assert ("number", "-11.24%", "-12.24%") in _differences("|营业收入（元）|1,065,150,876.00|1,200,095,568.76|-12.24%|", REPORT)
    added = "本季度合并及公司财务报表未经审计，审计机构未出具不审计报告。"
    assert verify(added, REPORT).outcome == "mismatch" and ("negation", "", "不") in _differences(added, REPORT)
    swapped = verify("格力股份有限公司持有38,770万元存款。", REPORT)
    assert swapped.outcome in ("mismatch", "none")
    for kept in ("本 季 度 合 并 及 公 司 财 务 报 表 未 经 审 计，审计机构未出具审计报告。",  # spaces between CJK characters
                 "|营业收入(元)|1,065,150,876.00|1,200,095,568.76|-11.24%|",  # half-width forms
                 "本季度合并及公司财务报表未经审计,审计机构未出具审计报告.",
                 "飞亚达股份有限公司持有38770万元存款。"):
        assert verify(kept, REPORT).outcome in ("exact", "tolerant", "fuzzy"), kept


def test_numbers_are_read_as_values():
    assert [t.norm for t in tokens("1,250,000 1 250 000 1.250.000,5 4,25 (1,234) −5% 3.5亿 500万 21st fifty-two")
            if t.flag] == ["#1250000", "#1250000", "#1250000.5", "#4.25", "#-1234", "#-5%", "#350000000",
                           "#5000000", "#21o", "#52"]
    assert [n.text for n in stated("R3.1.2 cites Document 7: 4.2 million, 10-15 items")] == ["7", "4.2 million", "10", "15"]
    assert {Decimal("4.2"), Decimal("4200000")} <= Numbers("$4.2 million").values
    assert Decimal("0.052") in Numbers("5.2%").values


def test_a_records_values_are_looked_for_in_its_passage_then_its_document():
    doc = Source(REPORT)
    passage = Source("|营业收入（元）|1,065,150,876.00|1,200,095,568.76|-11.24%|")
    record = {"item": "营业收入", "q1": 1065150876.0, "change": -0.1124, "date": "2024-03-31", "deposit": 387700000,
              "deposit_in_wan": 38770, "wrong": 1065150000, "company": "飞亚达", "invented": "格力电器",
              "audited": False, "note": "a long description " * 10, "_id": "R1.1.1"}
    assert ungrounded(record, (passage, doc)) == ["wrong", "invented"]
    assert ungrounded(record, (passage, doc), skip=["invented"]) == ["wrong"]
    assert field_grounded(True, (doc,)) is None and field_grounded(None, (doc,)) is None
    assert field_grounded(4.2, (Source("revenue of 4.21 million"),))  # written with fewer decimals: rounded
    assert not field_grounded(4, (Source("revenue of 4.21 million"),))  # an integer must be exact
    assert field_grounded("March 31, 2024", (doc,)) and dates("31 March 2024; 2024年3月31日") == {(2024, 3, 31)}
    assert field_grounded(3870000000, (Source("单位：万元\n|存款|387,000|"),))  # the declared unit


def test_the_answers_numbers_that_nothing_cited_states_are_listed():
    answer = "Revenue was 4.2 million (R1.1.1), up 5%; 3 ships sailed, and 1897 was the year. Total: 12,345."
    assert unsupported_numbers(answer, ["revenue 4,213,000, up 5.0%", "1897"], [3]) == ("12,345",)
    assert unsupported_numbers(answer, ["revenue 4,213,000, up 5.0%"], [3, 1897], computed_by="final_answer(x)") == ()
    assert unsupported_numbers(answer, ["revenue 4,213,000, up 5.0%"], [3, 1897],
                               computed_by="final_answer('Total: 12,345')") == ("12,345",)  # typed, not computed
    assert unsupported_numbers("1. Varna\n2. Whitby", []) == ()  # list markers


def test_stats_count_mismatches_and_ungrounded_records_apart():
    records = [{"_doc": 1, "_match": "exact"}, {"_doc": 1, "_match": "mismatch"},
               {"_doc": 2, "_match": "fuzzy", "_ungrounded": ["a", "b"]}, {"_doc": 2, "_match": "none"}]
    stats = EvidenceStats.of(records)
    assert (stats.verified, stats.mismatched, stats.ungrounded, stats.ungrounded_values) == (2, 1, 1, 2)
    assert stats.to_dict()["by_doc"]["1"] == {"records": 2, "verified": 1, "mismatch": 1, "ungrounded": 0, "share": 0.5}
    assert stats.by_doc["2"] == DocEvidence(records=2, verified=1, mismatch=0, ungrounded=1)
    assert list(stats.by_doc) == ["1", "2"] and "3" not in stats.by_doc and len(stats.by_doc) == 2
    placed = EvidenceStats.of(records, places={"2": 0, "1": 1})  # the run's parts' places: their order
    assert list(placed.by_doc) == ["2", "1"] and placed.by_doc == stats.by_doc and placed.to_dict() == stats.to_dict()
    assert "1 with a value that differs" in stats.line() and "2 values" in stats.line()


async def test_population_reasks_a_mismatched_record_once_naming_the_difference_and_drop_lists_it():
    import json

    import r3con
    from r3con.stages.populate import PopulateOptions, populate

    from .fakes import SIMPLE_SCHEMA, ScriptedLLM

    docs = r3con.documents_from_texts([("Log", LOG)])
    wrong = json.dumps({"people": [{"name": "Petrofsky", "_passage": "Mr. Petrofsky was missing on 16 June at 10:30 p.m."}]})
    right = json.dumps({"people": [{"name": "Petrofsky", "_passage": "Mr. Petrofsky was missing on 16 July at 10:30 p.m."}]})
    replies = iter([wrong, right])
    llm = ScriptedLLM({"populate": lambda request: next(replies)})
    result = await populate(llm, "who", SIMPLE_SCHEMA, docs, "")
    reask = llm.history[1].messages[-1].content
    assert 'the document says "July" where the passage says "June"' in reask
    (record,) = result.tables["people"]
    assert record["_match"] == "exact" and "_mismatch" not in record and result.evidence.reasked == 1

    llm = ScriptedLLM({"populate": lambda request: wrong})
    dropped = await populate(llm, "who", SIMPLE_SCHEMA, docs, "", PopulateOptions(unverified="drop"))
    assert dropped.tables["people"] == () and len(llm.history) == 1
    (gone,) = dropped.dropped
    assert gone["_match"] == "mismatch" and gone["_mismatch"] == [{"kind": "date", "document": "July", "record": "June"}]
    assert dropped.evidence.mismatched == 1 and dropped.evidence.dropped == 1


def test_a_passage_is_verified_at_its_own_twin_not_at_the_one_that_aligns_best():
    a = "The Series A Preferred Stock is entitled to share ratably in dividends on an as converted basis."
    doc = f"{a} Holders vote with the common stock. {a.replace('Series A ', 'Series AA ')}"
    copied = "The Series AA Preferred Stock is entitled to share ratably in dividends on as converted basis."
    verdict = verify(copied, doc)
    assert verdict.outcome == "fuzzy" and doc[verdict.match.start:verdict.match.end].startswith("The Series AA")
    assert verify(copied.replace("AA", "B"), doc).outcome == "mismatch"


def test_the_cli_names_what_differs_what_is_ungrounded_and_the_unsupported_numbers():
    from r3con.cli._run import evidence_lines

    item = {"id": "R1.1.1", "kind": "record", "doc": 1, "title": "Log", "passage": "On 6 July we sailed.",
            "match": "mismatch", "differences": [{"kind": "number", "document": "6", "record": "9"}],
            "ungrounded": ["day"]}
    lines = evidence_lines([item], [], unsupported=["1,250"])
    assert "(differs from the document: document says \u201c6\u201d, record says \u201c9\u201d)" in lines[2]
    assert "(values in neither passage nor document: day)" in lines[2]
    assert lines[-1] == "  numbers in the answer that nothing cited states: 1,250"
