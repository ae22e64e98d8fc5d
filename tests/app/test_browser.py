"""The app in Debian's chromium (headless, Selenium), against the scripted server: add a folder, see the
plan, ask, watch the progress, read the answer, open a citation to its marked passage, see the used files
lit; then ask again and see what was reused. Screenshots go to R3CON_SCREENSHOTS when set."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from r3con.demo import corpus_dir, question
from r3con.testing import FakeLLMServer, FaultPlan

from ..report.browser import missing_reason, start_chromium
from .running import RunningApp, demo_state

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

WAIT = 120


@pytest.fixture(scope="module")
def driver():
    browser = start_chromium(1400, 1000)
    yield browser
    browser.quit()


def _wait(driver, check, timeout: float = WAIT):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1,
                         ignored_exceptions=[StaleElementReferenceException]).until(lambda d: check(d))


def _by(driver, testid: str):
    return driver.find_elements("css selector", f"[data-testid='{testid}']")


def _files(driver) -> list[dict[str, str]]:
    """Each file of the tree as the page shows it now (read at once: the tree is drawn again as files change)."""
    return driver.execute_script("""return [...document.querySelectorAll("[data-testid='tree-file']")].map((f) => ({
        source: f.getAttribute("data-source"), status: f.getAttribute("data-status"), used: f.getAttribute("data-used"),
        title: f.getAttribute("title"), text: f.textContent}));""")


def _open(driver, app: RunningApp) -> None:
    driver.get(app.url)
    _wait(driver, lambda d: d.find_element("css selector", "html").get_attribute("data-ready"))


def _shot(driver, name: str) -> None:
    folder = os.environ.get("R3CON_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))


def _ask(driver, text: str) -> None:
    box = _by(driver, "question")[0]
    box.clear()
    box.send_keys(text)
    _wait(driver, lambda d: "calls" in _by(d, "plan")[0].text)
    before = driver.find_element("id", "live").get_attribute("data-live")
    _by(driver, "ask")[0].click()
    _wait(driver, lambda d: d.find_element("id", "live").get_attribute("data-live") != before)


def _finished(driver, timeout: float = WAIT) -> str:
    """Wait for the run's end; the title the live panel shows."""
    _wait(driver, lambda d: d.find_element("id", "live-title").text.startswith(("Finished", "Failed", "Cancelled")),
          timeout)
    return driver.find_element("id", "live-title").text


def _in_view(driver):
    """Into the run's view (the report's page in the frame), once it is ready."""
    driver.switch_to.default_content()
    _wait(driver, lambda d: d.find_element("id", "view").get_attribute("src").endswith("/view"))
    driver.switch_to.frame(driver.find_element("id", "view"))
    _wait(driver, lambda d: d.find_element("css selector", "html").get_attribute("data-ready"))


def _corpus(tmp_path: Path) -> Path:
    """The demo corpus, and a file r3con cannot read (the tree says why; the answer cannot use it)."""
    folder = tmp_path / "docs"
    shutil.copytree(corpus_dir(), folder)
    (folder / "scan.bin").write_bytes(bytes(range(256)) * 8)
    return folder


def test_the_demo_flow_from_a_folder_to_a_marked_passage(driver, tmp_path, fake_server):
    with RunningApp(demo_state(tmp_path, fake_server.base_url, [])) as app:
        _open(driver, app)
        assert "scripted" in driver.find_element("id", "endpoint").text
        field = _by(driver, "add-folder")[0]
        field.send_keys(str(_corpus(tmp_path)))
        field.submit()
        _wait(driver, lambda d: len(_by(d, "tree-file")) == 7)
        assert "6 read · 1 not" in driver.find_element("id", "tree").text
        skipped = [f for f in _files(driver) if f["status"] != "read"]
        assert [f["status"] for f in skipped] == ["skipped"] and "scan.bin" in skipped[0]["text"]
        driver.find_element("css selector", "[data-testid='tree-file'][data-status='read']").click()  # before a run: its text
        _wait(driver, lambda d: d.find_element("id", "preview").is_displayed())
        assert "Approved Supplier Register" in driver.find_element("id", "preview-text").text
        _ask(driver, question())
        plan = _by(driver, "plan")[0].text
        assert "6 documents" in plan and "relevance" in plan
        _wait(driver, lambda d: d.find_elements("css selector", "[data-testid='progress'] .stage"))
        _shot(driver, "app-running-1400.png")
        assert _finished(driver).startswith("Finished")
        stages = [s.get_attribute("data-stage") for s in driver.find_elements("css selector", ".stage.done")]
        assert stages == ["relevance", "schema", "populate", "reason"]
        assert "calls" in driver.find_element("id", "usage").text
        _wait(driver, lambda d: all(f["used"] in ("true", "false") for f in _files(d)))
        used = {f["source"] for f in _files(driver) if f["used"] == "true"}
        assert used and not any(p.endswith("scan.bin") for p in used)
        assert [f["used"] for f in _files(driver) if f["status"] != "read"] == ["false"]
        _in_view(driver)
        assert _by(driver, "answer")[0].text.strip()
        citations = _by(driver, "citation")
        assert citations
        driver.switch_to.default_content()
        _shot(driver, "app-answer-1400.png")
        driver.switch_to.frame(driver.find_element("id", "view"))
        citations[0].click()
        _wait(driver, lambda d: _by(d, "passage-mark"))
        mark = _by(driver, "passage-mark")[0]
        assert mark.is_displayed() and mark.text.strip()
        box = driver.find_element("css selector", ".active-record").text
        assert any(word in box for word in ("exact", "tolerant", "fuzzy", "differs", "not found"))
        cited_doc = driver.find_element("id", "doc-view").get_attribute("data-doc")
        assert "from the earlier run" not in driver.find_element("id", "doc-view").text  # a first run has none
        driver.switch_to.default_content()
        lit = [f for f in _files(driver) if f["used"] == "true"]
        assert any(f"document {cited_doc}" == f["title"] for f in lit)
        other = next(f for f in lit if f["title"] != f"document {cited_doc}")  # a file of the tree opens in the run's view
        driver.find_element("css selector", f"[data-testid='tree-file'][title='{other['title']}']").click()
        driver.switch_to.frame(driver.find_element("id", "view"))
        _wait(driver, lambda d: f"document {d.find_element('id', 'doc-view').get_attribute('data-doc')}" == other["title"])
        driver.switch_to.default_content()
        _shot(driver, "app-citation-1400.png")
        driver.find_element("id", "export").click()
        _wait(driver, lambda d: d.find_element("id", "exported").text.startswith("Written: "))
        written = Path(driver.find_element("id", "exported").text.removeprefix("Written: "))
        assert written.name == "report.html" and written.parent.parent == app.state.workspace.runs
        assert 'data-testid="records"' in written.read_text(encoding="utf-8")

        # ask again: the same question after a file changed reuses what did not change
        assert len(_by(driver, "history-run")) == 1
        changed = next(Path(f["source"]) for f in _files(driver) if "hamburg" in f["source"])
        changed.write_text(changed.read_text(encoding="utf-8") + "\nA late delivery was logged in December.\n",
                           encoding="utf-8")
        assert driver.find_element("id", "reuse").get_attribute("value") == "approximate"
        _ask(driver, question())
        assert _finished(driver).startswith("Finished")
        _wait(driver, lambda d: _by(d, "reuse"))
        reuse = _by(driver, "reuse")[0].text
        assert "not paid again" in reuse and "Reused from" in reuse
        second = app.json("GET", "/api/runs")["runs"][0]["name"]
        saved = app.json("GET", f"/api/runs/{second}")["reuse"]
        assert saved["calls_reused"] > 0 and any(c["recomputed"] for c in saved["stages"].values()), saved
        assert len(_by(driver, "history-run")) == 2
        driver.set_window_size(800, 1000)
        _shot(driver, "app-answer-800.png")
        _in_view(driver)
        driver.find_element("css selector", "#tabs a[href='#records']").click()
        table = _by(driver, "records")[0]
        _wait(driver, lambda d: table.is_displayed())
        headers = [th.get_attribute("textContent") for th in table.find_elements("css selector", "thead th")]
        assert "passage" in headers and "evidence" not in headers  # the field that repeats the passage, once
        # no word of a record is cut at 800 px: each cell is at least as wide as its longest word
        cut = driver.execute_script("""
            const probe = document.createElement('span'); probe.style.visibility = 'hidden'; document.body.append(probe);
            const out = [];
            for (const td of document.querySelectorAll('#record-table tbody td')) {
              const style = getComputedStyle(td); probe.style.font = style.font;
              for (const word of td.textContent.split(/\\s+/)) {
                probe.textContent = word;
                if (probe.getBoundingClientRect().width > td.clientWidth + 1) out.push(word);
              }
            }
            probe.remove(); return out;""")
        assert cut == [], cut
        driver.switch_to.default_content()
        driver.set_window_size(420, 900)  # a phone: each record a card, each value beside its column's name
        _in_view(driver)
        assert driver.execute_script("return getComputedStyle(document.querySelector('#record-table thead')).display") == "none"
        labels = driver.execute_script("return [...document.querySelectorAll('#record-table tbody tr:first-child td')]"
                                       ".map((td) => getComputedStyle(td, '::before').content)")
        assert '"passage "' in labels and '"id "' in labels
        driver.switch_to.default_content()
        driver.set_window_size(1400, 1000)


def _paid_twice(run_dir: Path) -> list[str]:
    """Requests the endpoint answered more than once in this run folder (calls.jsonl, every attempt)."""
    seen: dict[str, int] = {}
    for line in (run_dir / "calls.jsonl").read_text(encoding="utf-8").splitlines():
        call = json.loads(line)
        if not call.get("from_cache") and not call.get("error"):
            seen[call["request_hash"]] = seen.get(call["request_hash"], 0) + 1
    return [h for h, n in seen.items() if n > 1]


def test_cancel_then_resume_pays_nothing_twice(driver, tmp_path):
    with FakeLLMServer(faults=FaultPlan(delay_s=0.4)) as server, \
            RunningApp(demo_state(tmp_path, server.base_url, [str(corpus_dir())], concurrency=1)) as app:
        _open(driver, app)
        _ask(driver, question())
        _wait(driver, lambda d: any(s.text.startswith(("2 of", "3 of")) for s in d.find_elements("css selector", ".stage-count")))
        _by(driver, "cancel")[0].click()
        assert _finished(driver).startswith("Cancelled")
        _wait(driver, lambda d: _by(d, "resume")[0].is_displayed())
        (run_dir,) = app.state.workspace.runs.iterdir()
        before = len((run_dir / "calls.jsonl").read_text().splitlines())
        assert 0 < before < 23
        _wait(driver, lambda d: _by(d, "history-run") and _by(d, "history-run")[0].get_attribute("data-status") == "cancelled")
        _in_view(driver)
        banner = _by(driver, "run-warning")[0].text
        assert "stopped during relevance" in banner and "Error" not in banner
        driver.switch_to.default_content()
        _by(driver, "resume")[0].click()
        _wait(driver, lambda d: d.find_element("id", "live-title").text == "Running")
        assert _finished(driver).startswith("Finished")
        assert list(app.state.workspace.runs.iterdir()) == [run_dir]  # the same folder, continued
        assert (run_dir / "answer.txt").exists()
        assert _paid_twice(run_dir) == []
        _wait(driver, lambda d: _by(d, "history-run")[0].get_attribute("data-status") == "finished")


def test_a_run_that_fell_back_says_so_in_one_sentence(driver, tmp_path):
    with FakeLLMServer(faults=FaultPlan.parse("empty=1.0,max=1000,only=schema")) as server, \
            RunningApp(demo_state(tmp_path, server.base_url, [str(corpus_dir())])) as app:
        _open(driver, app)
        _ask(driver, question())
        assert _finished(driver).startswith("Finished")
        _wait(driver, lambda d: _by(d, "run-warning"))
        line = _by(driver, "run-warning")[0].text
        assert line.startswith("The schema stage failed") and "Error" not in line
        _shot(driver, "app-fallback-1400.png")
        _in_view(driver)
        assert _by(driver, "run-warning")[0].text.startswith("The schema stage failed")  # the report says it too
        driver.find_element("css selector", "#tabs a[href='#schema']").click()
        _wait(driver, lambda d: d.find_element("id", "schema").is_displayed())
        schema = driver.find_element("id", "schema").text
        assert "The schema stage failed" in schema and "No schema in this run folder" not in schema
        driver.switch_to.default_content()
