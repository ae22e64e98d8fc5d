"""The sandbox's plain data: output capture, observations, the isolation report's words."""

from __future__ import annotations

from r3con.sandbox import CellResult, IsolationReport
from r3con.sandbox._output import Capture, clip


def test_capture_counts_characters_not_bytes():
    capture = Capture(100)
    for _ in range(1000):
        capture.feed("é€".encode())  # 2- and 3-byte characters
    text = capture.text()
    assert text.startswith("é€" * 25) and text.endswith("é€" * 25)
    assert "[... 1900 characters cut ...]" in text
    small = Capture(100)
    small.feed(b"short")
    assert small.text() == "short"


def test_clip_keeps_head_and_tail():
    assert clip("abcdefghij", 20) == "abcdefghij"
    assert clip("abcdefghij", 4) == "ab\n[... 6 characters cut ...]\nij"


def test_observation_words_for_each_outcome():
    assert CellResult("", "", None, 0.1).observation() == "(the cell ran and printed nothing)"
    crashed = CellResult("partial\n", "", "WorkerCrashed: the worker died: a segmentation fault", 0.1,
                         crashed=True, restarted=True)
    text = crashed.observation()
    assert text.startswith("partial\nWorkerCrashed: the worker died: a segmentation fault\n")
    assert "session was restarted" in text


def test_describe_missing_names_each_layer_and_its_reason():
    report = IsolationReport({"process": "on", "no_network": "off: unshare refused (Operation not permitted)",
                              "readonly_fs": "off: skipped on request"})
    assert report.missing() == ["no_network", "readonly_fs"]
    assert report.describe_missing(["no_network"]) == (
        "network isolation off (unshare refused (Operation not permitted))")
    assert report.to_dict()["missing"] == ["no_network", "readonly_fs"]
