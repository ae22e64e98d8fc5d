"""A run folder is written by one process at a time: a second run or resume of it exits 2 naming the holder."""

from __future__ import annotations

import subprocess
import sys

from r3con.testing import FakeLLMServer

from .test_failures import calls_logged, one_line, r3con, run_args, run_folder

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
time.sleep(30)
"""


def test_a_resume_of_a_folder_another_process_writes_exits_2_naming_it(capsys, monkeypatch, corpus, tmp_path):
    runs = tmp_path / "runs"
    with FakeLLMServer() as server:
        code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, runs))
        assert code == 0, err
        folder = run_folder(runs)
        logged = calls_logged(folder)
        with subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE,
                              text=True) as holder:
            try:
                assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
                code, _, err = r3con(capsys, monkeypatch, "run", "--resume", str(folder), "--base-url",
                                     server.base_url, "--quiet", "--no-cache")
            finally:
                holder.kill()
        line = one_line(err)
        assert code == 2
        assert f"the run folder {folder} is in use by process {holder.pid} (another r3con run or --resume" in line
        assert calls_logged(folder) == logged, "the refused resume wrote nothing"
        code, _, err = r3con(capsys, monkeypatch, "run", "--resume", str(folder), "--base-url", server.base_url,
                             "--quiet")
        assert code == 0, err
