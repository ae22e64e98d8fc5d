"""Values in the report, in a real browser: a record whose passage differs from its document in a value
shows the difference (document says X, record says Y), not a green badge; a value in neither its passage
nor its document is marked in the records table and where the answer cites the record; the answer's
numbers that nothing cited states are listed. The run is a real pipeline run over the one LLM seam, whose
scripted model copies a date wrong, invents a captain's name and states a number it never computed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import r3con
from r3con.pipeline.method import run

from ..fakes import ScriptedLLM, schema_reply, stack
from .browser import missing_reason, start_chromium

LOG = Path(__file__).parent.parent / "fixtures" / "evidence" / "dracula_demeter.txt"
SCHEMA = {"type": "object", "properties": {"events": {"type": "array", "items": {"type": "object", "properties": {
    "what": {"type": "string"}, "day": {"type": ["integer", "null"]}, "captain": {"type": ["string", "null"]}},
    "required": ["what"]}}}}
# the log says "On 6 July we finished taking in cargo" and "On 11 July at dawn entered Bosphorus"
RECORDS = {"events": [
    {"_passage": "On 9 July we finished taking in cargo, silver sand and boxes of earth.", "what": "cargo", "day": 9},
    {"_passage": "On 11 July at dawn entered Bosphorus.", "what": "Bosphorus", "day": 11, "captain": "Ivan Okonkwo"},
]}
DOC = r3con.load_documents([LOG])[0].number  # the log's number, from its file's name
ANSWER = (f"The Demeter took in 1,250 boxes of earth on 9 July and entered the Bosphorus on 11 July.\n"
          f"Sources: R{DOC}.1.1, R{DOC}.1.2")


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> r3con.RunResult:
    llm = ScriptedLLM({"relevance": lambda r: "The log of the Demeter: cargo of earth, Varna to Whitby.",
                       "schema": lambda r: schema_reply(SCHEMA), "populate": lambda r: json.dumps(RECORDS),
                       "reason": lambda r: ANSWER})
    settings = r3con.Settings.resolve(env={}, out_dir=tmp_path_factory.mktemp("runs"), reasoning="direct",
                                      unverified="keep")

    async def go() -> r3con.RunResult:
        return await run("When did the Demeter load its cargo, and how much?", r3con.load_documents([LOG]),
                         settings, llm=stack(llm))

    import asyncio

    return asyncio.run(go())


@pytest.fixture(scope="module")
def driver():
    if missing_reason() is not None:
        pytest.skip(missing_reason() or "")
    browser = start_chromium()
    yield browser
    browser.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("R3CON_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"screenshots in {folder}")
    return folder


def _open(driver, report: Path, hash_: str = ""):
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    driver.get_log("browser")
    driver.get(report.resolve().as_uri() + hash_)
    WebDriverWait(driver, 20).until(lambda d: d.find_element("css selector", "html").get_attribute("data-ready"))


def _texts(driver, selector: str) -> list[str]:
    return [e.text for e in driver.find_elements("css selector", selector)]


def _severe(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def test_the_run_found_the_mismatch_the_ungrounded_value_and_the_unsupported_number(result):
    first, second = result.records["events"]
    assert first["_match"] == "mismatch" and first["_mismatch"] == [{"kind": "number", "document": "6", "record": "9"}]
    assert first["_ungrounded"] == ["day"]  # the log has no 9 at all
    assert second["_match"] == "exact" and second["_ungrounded"] == ["captain"]
    assert result.unsupported_numbers == ("1,250", "9")  # the first record's 9 is ungrounded: it supports nothing
    assert result.evidence_stats.mismatched == 1 and result.evidence_stats.ungrounded == 2


def test_the_answer_shows_the_difference_the_ungrounded_value_and_the_unsupported_number(driver, result, shots):
    _open(driver, result.report)
    items = driver.find_elements("css selector", "ol.evidence > li")
    assert [i.find_element("css selector", "a.cite").text for i in items] == [f"[R{DOC}.1.1]", f"[R{DOC}.1.2]"]
    mismatch, grounded = items
    assert mismatch.find_element("css selector", ".badge").text == "differs from the document"
    assert "mismatch" in mismatch.find_element("css selector", ".badge").get_attribute("class")
    assert _texts(driver, "ol.evidence > li:first-child ul.differences li") == ["number: document says “6”, record says “9”"]
    assert "ungrounded: captain" in grounded.text and "Values in neither its passage nor its document: captain" in grounded.text
    unsupported = driver.find_element("css selector", "#answer-body .unsupported")
    assert _texts(driver, "#answer-body .unsupported code") == ["1,250", "9"]
    assert "nothing it cites states" in unsupported.text
    assert "1 differs from its document in a value" in driver.find_element("css selector", "#answer-body p.muted").text
    driver.save_screenshot(str(shots / "evidence-answer.png"))
    assert _severe(driver) == []


def test_the_records_table_marks_the_mismatch_and_the_ungrounded_cell(driver, result, shots):
    _open(driver, result.report, "#records")
    rows = driver.find_elements("css selector", "#record-table tbody tr")
    assert [r.get_attribute("data-id") for r in rows] == [f"R{DOC}.1.1", f"R{DOC}.1.2"]
    assert "document says" in rows[0].text and rows[0].find_element("css selector", ".badge.mismatch")
    assert [c.text.rstrip(" ⚠") for c in rows[1].find_elements("css selector", "td.ungrounded")] == ["Ivan Okonkwo"]
    assert [c.text.rstrip(" ⚠") for c in rows[0].find_elements("css selector", "td.ungrounded")] == ["9"]
    driver.save_screenshot(str(shots / "evidence-records.png"))
    driver.find_element("css selector", "#match-filter option[value='ungrounded']").click()
    assert [r.get_attribute("data-id") for r in driver.find_elements("css selector", "#record-table tbody tr")] == [f"R{DOC}.1.1", f"R{DOC}.1.2"]
    driver.find_element("css selector", "#match-filter option[value='mismatch']").click()
    assert [r.get_attribute("data-id") for r in driver.find_elements("css selector", "#record-table tbody tr")] == [f"R{DOC}.1.1"]
    assert _severe(driver) == []


def test_a_mismatched_record_opens_on_the_documents_words_with_the_difference(driver, result, shots):
    _open(driver, result.report, f"#rec/R{DOC}.1.1")
    box = driver.find_element("css selector", "#doc-view .active-record")
    assert "error" in box.get_attribute("class") and "differs in a value" in box.text
    assert "number: document says “6”, record says “9”" in box.text
    marked = driver.find_element("css selector", "#doc-view mark.active")
    assert "mismatch" in marked.get_attribute("class") and marked.text.startswith("On 6 July")
    driver.save_screenshot(str(shots / "evidence-mismatch.png"))
    assert _severe(driver) == []
