"""The app against the real llama.cpp server (../shared/llama.cpp, a tiny random-weight model whose replies
are noise), found on its port as `r3con run` finds a local server: the page names it with its window, the
plan is made for that window, and a run over noise ends with an answer and every file accounted for."""

from __future__ import annotations

import pytest

from r3con.app import open_state
from r3con.config import Settings

from ..real_server.conftest import Llama
from ..report.browser import missing_reason, start_chromium
from .running import RunningApp
from .test_browser import _ask, _by, _files, _finished, _in_view, _open, _shot, _wait

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


def test_the_app_finds_llama_cpp_and_answers_over_noise(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old and lives in Oslo.")
    (docs / "b.md").write_text("# Letter\n\nBob Stone, aged 41, wrote to Ann Lee.")
    (docs / "c.txt").write_text("Census\n\nCara Holm, 29, moved to Bergen.")
    with Llama(tmp_path / "llama.log", "-c", "32768", "-np", "4") as server:
        monkeypatch.setenv("R3CON_LOCAL_PORTS", f"{server.port}=llama.cpp")
        settings = Settings.resolve(env={}, out_dir=tmp_path / "ws" / "runs", cache_path=tmp_path / "llm.sqlite",
                                    corpus_dir=tmp_path / "corpus", note_max_tokens=128, populate_max_tokens=256,
                                    reason_max_tokens=512, max_steps=2, rounds=1)
        state = open_state(tmp_path / "ws", [str(docs)], settings)
        assert state.endpoint.kind == "llama.cpp" and state.endpoint.window == 8192
        driver = start_chromium(1400, 1000)
        try:
            with RunningApp(state) as app:
                _open(driver, app)
                line = driver.find_element("id", "endpoint").text
                assert "llama.cpp" in line and server.url in line and "8,192" in line and "free" in line
                _wait(driver, lambda d: len(_by(d, "tree-file")) == 3)
                _ask(driver, "How old are the people named?")
                assert "3 documents" in _by(driver, "plan")[0].text
                title = _finished(driver, 400)  # a shared machine's two cores run the model's noise
                assert title.startswith("Finished"), title
                _wait(driver, lambda d: all(f["used"] in ("true", "false") for f in _files(d)))
                _shot(driver, "app-llama-1400.png")
                _in_view(driver)
                assert _by(driver, "answer")[0].text.strip()
        finally:
            driver.quit()
