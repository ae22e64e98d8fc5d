"""The screenshots of docs/app.md, taken again: `python -m tests.app.screenshots docs/images` (Debian's
chromium, the scripted server, the demo corpus; the app in a temporary workspace)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from r3con.demo import corpus_dir, question
from r3con.testing import FakeLLMServer

from ..report.browser import start_chromium
from .running import RunningApp, demo_state
from .test_browser import _ask, _by, _files, _finished, _in_view, _open, _wait


def take(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    os.environ["R3CON_LOCAL_PORTS"] = ""
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(port=0) as server, \
            RunningApp(demo_state(Path(tmp), server.base_url, [str(corpus_dir())])) as app:
        driver = start_chromium(1400, 1000)
        try:
            _open(driver, app)
            _ask(driver, question())
            _finished(driver)
            _wait(driver, lambda d: all(f["used"] for f in _files(d)))
            _in_view(driver)
            driver.switch_to.default_content()
            driver.execute_script("document.getElementById('live').scrollIntoView()")
            driver.save_screenshot(str(out / "app-1400.png"))
            driver.switch_to.frame(driver.find_element("id", "view"))
            _by(driver, "citation")[1].click()
            _wait(driver, lambda d: _by(d, "passage-mark"))
            driver.switch_to.default_content()
            driver.execute_script("document.getElementById('result').scrollIntoView()")
            driver.save_screenshot(str(out / "app-citation-1400.png"))
            driver.set_window_size(800, 1100)
            driver.switch_to.frame(driver.find_element("id", "view"))
            driver.find_element("css selector", "#tabs a[href='#records']").click()
            driver.switch_to.default_content()
            driver.execute_script("window.scrollTo(0, 0)")
            driver.save_screenshot(str(out / "app-800.png"))
            driver.execute_script("document.getElementById('result').scrollIntoView()")
            driver.save_screenshot(str(out / "app-records-800.png"))
        finally:
            driver.quit()


if __name__ == "__main__":
    take(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images"))
