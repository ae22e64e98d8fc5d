"""A run stopped by a really full disk (a small tmpfs filled up mid-run) resumes paying for nothing twice."""

from __future__ import annotations

import errno
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
    """A thread that fills `disk` once `calls` lines are in the run's calls.jsonl (0: once the run folder has
    its manifest, before any call is logged)."""
    def fill() -> None:
        while not stop.is_set():
            logs = list(runs.glob("*/calls.jsonl"))
            if (logs and logs[0].read_text(errors="replace").count("\n") >= calls) or \
                    (calls == 0 and list(runs.glob("*/manifest.json"))):
                with open(disk / "filler", "wb") as out:
                    try:
                        while True:
                            out.write(b"\0" * (1 << 16))
                            out.flush()
                    except OSError:
                        return
            time.sleep(0.002)

    thread = threading.Thread(target=fill, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("logged", [4, 0], ids=["after 4 calls", "before the first call"])
def test_a_run_stopped_by_a_full_disk_resumes_paying_nothing_twice(capsys, monkeypatch, corpus, small_disk, logged):
    runs = small_disk / "runs"
    monkeypatch.setenv("XDG_CACHE_HOME", str(small_disk / "cache"))
    stop = threading.Event()
    with FakeLLMServer(faults=None) as server:
        filler = fill_when(small_disk, runs, logged, stop)
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


async def test_no_call_is_sent_before_its_reply_has_room_on_a_disk_already_full(small_disk):
    # the disk fills before the run's first call: its reply could not be logged, and a resume would pay again
    from r3con.llm.layers.calllog import CallLog, Recorded
    from r3con.llm.types import ChatRequest, Message

    from ..fakes import ScriptedLLM

    with open(small_disk / "filler", "wb") as out, pytest.raises(OSError):
        while True:
            out.write(b"\0" * (1 << 16))
            out.flush()
    model = ScriptedLLM(default="a note.")
    log = CallLog(small_disk / "run" / "calls.jsonl")
    request = ChatRequest(messages=(Message("user", "text"),), stage="relevance", doc=1)
    with pytest.raises(OSError) as raised:
        await Recorded(model, log).complete(request)
    assert raised.value.errno == errno.ENOSPC and model.history == [], "nothing was sent, so nothing is paid"
    log.close()
    (small_disk / "filler").unlink()  # space freed: the call goes out and its reply is kept
    log = CallLog(small_disk / "run" / "calls.jsonl")
    assert (await Recorded(model, log).complete(request)).content == "a note."
    log.close()
    assert len(model.history) == 1 and json.loads((small_disk / "run" / "calls.jsonl").read_text())["stage"] == "relevance"
