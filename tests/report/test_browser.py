"""The report in a real browser (Debian's chromium, headless, through Selenium): a citation opens its
passage highlighted, the records table sorts and filters, notes show what each round changed, and a
hostile document or model reply runs nothing. Screenshots go to a temporary folder (printed), or to
R3CON_SCREENSHOTS when set."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

import r3con
from r3con.pipeline.method import run
from r3con.report import write_report
from r3con.testing import FakeLLMServer, FaultPlan

from ..fakes import real_data
from .browser import missing_reason, start_chromium
from .hostile import HOSTILE_DOC, HOSTILE_REPLY

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

def _dracula() -> tuple[str, list[r3con.Document]]:
    """The whole Dracula corpus (its committed slice is too small to have round changes and flagged records
    in every run); skips saying where it looked."""
    folder = real_data("dracula")
    question = json.loads((folder / "questions.json").read_text())[0]["question"]
    return question, r3con.load_documents([folder / "docs"])


def _run(question: str, docs, out: Path, faults: FaultPlan | None = None) -> r3con.RunResult:
    async def go() -> r3con.RunResult:
        with FakeLLMServer(faults=faults) as server:
            settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=out,
                                              unverified="keep")
            return await run(question, docs, settings)

    return asyncio.run(go())


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("R3CON_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"screenshots in {folder}")
    return folder


@pytest.fixture(scope="module")
def driver():
    browser = start_chromium()
    yield browser
    browser.quit()


@pytest.fixture(scope="module")
def dracula(tmp_path_factory) -> r3con.RunResult:
    """A real run over the scripted server, which invents a share of passages so some records are flagged."""
    question, docs = _dracula()
    return _run(question, docs, tmp_path_factory.mktemp("dracula"), FaultPlan(invent=0.2, reword=0.3, seed=5))


def _open(driver, report: Path, hash_: str = ""):
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    driver.get_log("browser")  # each test's console log starts with the report's loading
    driver.get(report.resolve().as_uri() + hash_)
    WebDriverWait(driver, 20).until(lambda d: d.find_element("css selector", "html").get_attribute("data-ready"))


def _js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def _severe(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def test_clicking_a_citation_shows_its_passage_highlighted_in_its_document(driver, dracula, shots):
    from selenium.webdriver.support.ui import WebDriverWait

    cited = next(e for e in dracula.evidence if e.kind == "record" and e.span)
    _open(driver, dracula.report)
    driver.save_screenshot(str(shots / "answer.png"))
    link = driver.find_element("css selector", f"ol.evidence a.cite[href='#rec/{cited.id}']")
    link.click()
    WebDriverWait(driver, 10).until(lambda d: d.find_elements("css selector", "#doc-view mark.active"))
    marked = _js(driver, "return Array.from(document.querySelectorAll('#doc-view mark.active')).map(m => m.textContent).join('')")
    document = next(d for d in dracula.documents if d.number == cited.doc)
    assert marked == document.text[cited.span[0]:cited.span[1]] == cited.passage
    assert _js(driver, "return document.getElementById('doc-view').getAttribute('data-doc')") == str(cited.doc)
    assert _js(driver, "return location.hash") == f"#rec/{cited.id}"
    top, bottom = _js(driver, "const r = document.querySelector('#doc-view mark.active').getBoundingClientRect(); return [r.top, r.bottom]")
    assert 0 <= top < _js(driver, "return innerHeight"), "the passage is scrolled into view"
    assert driver.find_element("css selector", "#documents").is_displayed()
    driver.save_screenshot(str(shots / "citation.png"))
    assert _severe(driver) == []


def _column(driver, index: int) -> list[str]:
    return _js(driver, f"return Array.from(document.querySelectorAll('#record-table tbody tr td:nth-child({index})')).map(td => td.textContent)")


def test_the_records_table_sorts_by_a_column_both_ways(driver, dracula, shots):
    _open(driver, dracula.report, "#records")
    rows = [r for rows in dracula.records.values() for r in rows]
    assert len(_column(driver, 1)) == min(len(rows), 200)
    driver.find_element("css selector", "#record-table th[data-col='_doc']").click()
    docs = [int(text.split()[0].split(".")[0]) for text in _column(driver, 2)]
    assert docs == sorted(docs) and docs[0] < docs[-1]
    header = driver.find_element("css selector", "#record-table th[data-col='_id']")
    header.click()
    header = driver.find_element("css selector", "#record-table th[data-col='_id']")
    header.click()  # the second click sorts the other way
    ids = _column(driver, 1)
    key = [tuple(int(x) for x in i[1:].split(".")) for i in ids]
    assert key == sorted(key, reverse=True) and driver.find_element(
        "css selector", "#record-table th[data-col='_id']").get_attribute("aria-sort") == "descending"
    driver.save_screenshot(str(shots / "records-sorted.png"))
    assert _severe(driver) == []


def _shown(value) -> str:
    """What the page shows of a value (as its script does: JSON for objects, nothing for null)."""
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else str(value)


def test_the_records_table_filters_by_text_and_by_whether_the_passage_was_found(driver, dracula, shots):
    from selenium.webdriver.common.by import By

    _open(driver, dracula.report, "#records")
    (table, rows), = dracula.records.items()
    word = "dracula"
    expected = [r for r in rows if any(word in _shown(v).lower() for v in r.values())]
    assert 0 < len(expected) < len(rows)
    driver.find_element(By.ID, "record-filter").send_keys(word)
    assert _column(driver, 1) == [r["_id"] for r in expected][:200]
    assert driver.find_element(By.ID, "record-count").text.startswith(f"{len(expected)} of {len(rows)} records")
    driver.find_element(By.ID, "record-filter").clear()
    driver.find_element(By.CSS_SELECTOR, "#match-filter option[value='none']").click()
    flagged = [r["_id"] for r in rows if r["_match"] == "none"]
    assert flagged and _column(driver, 1) == flagged
    assert set(_js(driver, "return Array.from(document.querySelectorAll('#record-table tbody .badge')).map(b => b.textContent)")) == {"not found"}
    driver.save_screenshot(str(shots / "records-flagged.png"))
    assert _severe(driver) == []


def test_a_flagged_record_says_its_passage_was_not_found(driver, dracula):
    flagged = next(r for rows in dracula.records.values() for r in rows if r["_match"] == "none")
    _open(driver, dracula.report, f"#rec/{flagged['_id']}")
    box = driver.find_element("css selector", "#doc-view .error").text
    assert flagged["_id"] in box and "not found in this document" in box
    assert not driver.find_elements("css selector", "#doc-view mark.active")


def test_notes_show_what_each_round_changed(driver, dracula, shots):
    changed = next(key for key, _ in dracula.notes[1].items() if dracula.notes[0].get(key) != dracula.notes[1][key])
    doc = changed.split(".")[0]
    _open(driver, dracula.report, f"#doc/{doc}")
    assert driver.find_elements("css selector", "#doc-view .note ins"), "added words are marked"
    rounds = [e.text for e in driver.find_elements("css selector", "#doc-view .round")]
    assert any(r.startswith("Round 1") for r in rounds) and any(r.startswith("Round 2") for r in rounds)
    driver.save_screenshot(str(shots / "notes.png"))
    driver.find_element("css selector", "#show-changes").click()
    assert all(not d.is_displayed() for d in driver.find_elements("css selector", "#doc-view .note del"))


def test_every_view_renders_without_a_console_error(driver, dracula, shots):
    _open(driver, dracula.report)
    for view in ("documents", "records", "schema", "agent", "inputs", "usage", "settings", "answer"):
        driver.find_element("css selector", f"#tabs a[href='#{view}']").click()
        assert driver.find_element("css selector", f"#{view}").is_displayed()
        assert driver.find_element("css selector", f"#{view}").text.strip()
        if view in ("agent", "usage", "schema"):
            driver.save_screenshot(str(shots / f"{view}.png"))
    assert driver.find_elements("css selector", "#agent pre.code") and driver.find_elements("css selector", "svg.chart rect")
    assert _severe(driver) == []


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> r3con.RunResult:
    """A run over a document full of markup, then the model's answer and agent output made just as hostile."""
    folder = tmp_path_factory.mktemp("hostile-docs")
    (folder / "log.txt").write_text(HOSTILE_DOC, encoding="utf-8")
    (folder / "other.txt").write_text("A letter\n\nMina wrote to Lucy about the storm at Whitby.\n", encoding="utf-8")
    result = _run(HOSTILE_REPLY + " Who sailed?", r3con.load_documents([folder]), tmp_path_factory.mktemp("hostile"))
    run_dir = result.run_dir
    (run_dir / "answer.txt").write_text(HOSTILE_REPLY + "\n", encoding="utf-8")
    transcript = json.loads((run_dir / "transcript.json").read_text())
    for step in transcript["steps"]:
        step.update(reply=HOSTILE_REPLY, code=HOSTILE_REPLY, observation=HOSTILE_REPLY, error=HOSTILE_REPLY)
    (run_dir / "transcript.json").write_text(json.dumps(transcript))
    write_report(run_dir)
    return result


def test_a_hostile_document_and_model_reply_show_as_text_and_run_nothing(driver, hostile, shots):
    from selenium.common.exceptions import NoAlertPresentException

    assert "<script>" in hostile.documents[0].text and any("onerror" in n for n in hostile.notes[-1].values())
    _open(driver, hostile.report)
    log = f"#doc/{hostile.documents[0].number}"
    for target in ("#answer", log, "#records", "#schema", "#agent", "#inputs", "#usage", "#settings"):
        driver.execute_script("location.hash = arguments[0]", target)
        for i in range(min(40, len(driver.find_elements("css selector", "main a")))):
            links = driver.find_elements("css selector", "main a")  # a click may draw the view anew
            if i < len(links) and links[i].is_displayed():
                links[i].click()
                driver.execute_script("location.hash = arguments[0]", target)
        with pytest.raises(NoAlertPresentException):
            driver.switch_to.alert.text  # noqa: B018 - reading it is what raises when there is none
        assert _js(driver, "return typeof window.__pwned") == "undefined", target
        if target == log:
            driver.save_screenshot(str(shots / "hostile-document.png"))
    assert _js(driver, "return document.querySelectorAll('img, iframe, style:not(head style), script:not([id]):not(:last-of-type)').length") == 0
    assert _js(driver, "return document.querySelectorAll('[onerror], [onload], [onclick]').length") == 0
    hrefs = _js(driver, "return Array.from(document.querySelectorAll('a')).map(a => a.getAttribute('href'))")
    tables = json.loads((hostile.run_dir / "manifest.json").read_text()).get("tables", {}).get("files", [])
    # links stay in the page, but for the run's own tables beside it (records/*.parquet, records.duckdb)
    assert hrefs and all(h.startswith("#") or (h in tables and h.startswith("records")) for h in hrefs), hrefs
    _open(driver, hostile.report, log)
    text = _js(driver, "return document.querySelector('#doc-view pre.doc-text').textContent")
    assert text == hostile.documents[0].text, "the document shows as its own text"
    driver.execute_script("location.hash = '#answer'")
    assert driver.find_element("css selector", ".answer-text").text == HOSTILE_REPLY
    driver.save_screenshot(str(shots / "hostile-answer.png"))
    assert _severe(driver) == []


def test_the_content_security_policy_blocks_markup_that_got_into_the_page(driver, hostile, tmp_path):
    """Defence in depth: were an escaping bug to let markup in, the policy would still stop it running."""
    page = hostile.report.read_text(encoding="utf-8")
    injected = tmp_path / "report.html"
    injected.write_text(page.replace("</main>", '<script>window.__pwned = "inline"</script>'
                                     '<img src="x" onerror="window.__pwned = \'img\'"></main>'), encoding="utf-8")
    _open(driver, injected)
    assert _js(driver, "return typeof window.__pwned") == "undefined"
    assert _js(driver, "return document.documentElement.getAttribute('data-ready')"), "the report's own script ran"
    blocked = [m for m in _severe(driver) if "Content Security Policy" in m]
    assert blocked, "the browser says what it refused"
