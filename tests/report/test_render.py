"""The page: data embedded as JSON that cannot break out of its script element, a Content-Security-Policy
that lets only our own inline script and style run, nothing fetched from anywhere."""

import html
import json
import re

from r3con.report._render import csp_hash, json_for_script, render

HOSTILE = '</script><script>alert(1)</script><img src=x onerror="alert(2)"> & <!-- x'


def _data(**over):
    base = {"run_dir": "/r", "question": "Q", "answer": "A", "error": None, "evidence": [], "unknown_citations": [],
            "evidence_stats": None, "inputs": {}, "documents": [], "texts": {}, "rounds": 0, "notes": {},
            "schema": None, "schema_tables": [], "records": {}, "dropped": [], "transcript": {}, "usage": {},
            "timing": {}, "calls": 0, "endpoint": {}, "settings": {}, "run": {}, "problems": []}
    return {**base, **over}


def test_json_for_script_escapes_what_could_close_the_element_and_round_trips():
    text = json_for_script({"t": HOSTILE})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"t": HOSTILE}


def test_the_page_escapes_untrusted_text_everywhere_it_puts_it():
    page = render(_data(question=HOSTILE, answer=HOSTILE, settings={"out_dir": HOSTILE},
                        endpoint={"base_url": HOSTILE}, inputs={"read": [{"doc": 1, "source": HOSTILE}]}))
    assert HOSTILE not in page and "<img" not in page and "alert(1)</script>" not in page
    assert page.count("<script") == 2  # the data block and our own script, nothing else
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in page  # shown as text in the title, heading, tables


def test_the_content_security_policy_pins_the_inline_script_and_style_by_hash():
    page = render(_data())
    csp = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1))
    script = re.search(r"<script>(.*?)</script>", page, flags=re.S).group(1)
    style = re.search(r"<style>(.*?)</style>", page, flags=re.S).group(1)
    assert f"script-src {csp_hash(script)};" in csp and f"style-src {csp_hash(style)};" in csp
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp


def test_the_page_loads_nothing_from_anywhere():
    page = render(_data(usage={"by_stage": {"relevance": {"calls": 2, "prompt_tokens": 10, "cached_tokens": 4}}}))
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)=""", page)
    assert "innerHTML" not in page and "eval(" not in page and "document.write" not in page
    assert "<svg" in page  # the usage chart is inline
