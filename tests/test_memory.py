"""pipeline.memory: what a stage freed goes back to the system (glibc), and nothing happens elsewhere."""

import ctypes.util
from pathlib import Path

import pytest

from r3con.pipeline import memory


def anon_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(not Path("/proc/self/status").exists() or memory._malloc_trim() is None,
                    reason="malloc_trim is glibc's (Linux): elsewhere give_back does nothing")
def test_the_holes_a_stage_left_go_back_to_the_system():
    # 1 KB objects (over pymalloc's 512 B: the C heap's), one in ten kept: freed, they leave holes the heap
    # keeps, which only malloc_trim hands back, not the heap's top trimmed on free
    held = [b"x" * 1000 + i.to_bytes(4, "big") for i in range(120_000)]
    kept = held[::10]
    del held
    before = anon_kib()
    assert memory.give_back() is True
    after = anon_kib()
    assert before - after > 40 * 1024, (before, after)  # of ~105 MiB freed
    assert len(kept) == 12_000 and kept[5][-4:] == (50).to_bytes(4, "big")  # what was kept is intact


def test_without_malloc_trim_nothing_is_done(monkeypatch):
    memory._malloc_trim.cache_clear()
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    try:
        assert memory.give_back() is False
    finally:
        memory._malloc_trim.cache_clear()
