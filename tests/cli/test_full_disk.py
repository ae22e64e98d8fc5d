"""A run stopped by a really full disk (a small tmpfs filled up mid-run) resumes paying for nothing twice."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from r3con.testing import FakeLLMServer

from .test_failures import r3con, run_args, run_folder

SIZE = 24 << 20  # the tmpfs: room for the run folder, the cache and calls.jsonl's reserve (4 MiB)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs of our own (needs the right to mount: root in a container), unmounted after."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()[:100]}); the test needs a disk it can fill")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_when(disk: Path, runs: Path, calls: int, stop: threading.Event) -> threading.Thread:
    """A thread that fills `disk` once `calls` lines are in the run's calls.jsonl."""
    def fill() -> None:
        while not stop.is_set():
            logs = list(runs.glob("*/calls.jsonl"))
            if logs and logs[0].read_text(errors="replace").count("\n") >= calls:
                with open(disk / "filler", "wb") as out:
                    try:
                        while True:
                            out.write(b"\0" * (1 << 16))
                            out.flush()
                    except OSError:
                        return
            time.sleep(0.01)

    thread = threading.Thread(target=fill, daemon=True)
    thread.start()
    return thread


def test_a_run_stopped_by_a_full_disk_resumes_paying_nothing_twice(capsys, monkeypatch, corpus, small_disk):
    runs = small_disk / "runs"
    monkeypatch.setenv("XDG_CACHE_HOME", str(small_disk / "cache"))
    stop = threading.Event()
    with FakeLLMServer(faults=None) as server:
        filler = fill_when(small_disk, runs, 4, stop)
        try:
            code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, runs, "--concurrency", "2"))
        finally:
            stop.set()
            filler.join()
        assert code == 1 and "no space left on the device" in err, err
        folder = run_folder(runs)
        made = len(server.calls())
        (small_disk / "filler").unlink()  # space freed
        code, out, err = r3con(capsys, monkeypatch, "run", "--resume", str(folder), "--quiet")
        assert code == 0, err
        first, second = server.calls()[:made], server.calls()[made:]
    answered = {c["request_hash"] for c in first if c.get("status", 200) == 200}
    paid_twice = answered & {c["request_hash"] for c in second}
    assert paid_twice == set(), f"{len(paid_twice)} answered calls were sent again after the disk filled up"
    assert second and json.loads((folder / "result.json").read_text())["answer"]
    assert os.path.getsize(folder / "calls.jsonl") > 0
