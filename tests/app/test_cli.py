"""`r3con app` as a person starts it: it prints its address with the token, answers there, and with --demo
asks the scripted model over the bundled corpus, offline."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "R3CON_LOCAL_PORTS": ""}
    proc = subprocess.Popen([sys.executable, "-m", "r3con", "app", "--no-browser", "--port", "0",
                             "--workspace", str(tmp_path / "ws"), *args],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=tmp_path)
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:
        said.append(line)
        found = re.search(r"open (http://\S+)", line)
        if found:
            return proc, found.group(1), said
    _stop(proc)
    raise AssertionError(f"r3con app printed no address: {''.join(said)}")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.communicate(timeout=15)


def test_demo_prints_its_address_and_serves_the_demo_corpus(tmp_path):
    proc, url, _ = _start(tmp_path, "--demo")
    try:
        assert url.startswith("http://127.0.0.1:") and "token=" in url
        base, token = url.split("/?token=")
        with urllib.request.urlopen(url, timeout=10) as page:
            assert 'data-testid="question"' in page.read().decode()
        request = urllib.request.Request(f"{base}/api/about", headers={"X-R3con-Token": token})
        with urllib.request.urlopen(request, timeout=10) as reply:
            about = json.loads(reply.read())
        assert about["demo"] is True and about["endpoint"]["kind"].startswith("scripted")
        assert [Path(f).name for f in about["folders"]] == ["corpus"]
        try:
            with urllib.request.urlopen(f"{base}/api/about", timeout=10):
                raise AssertionError("answered without the token")
        except urllib.error.HTTPError as refused:
            assert refused.code == 401
            refused.close()
    finally:
        _stop(proc)


def test_a_host_other_than_loopback_is_warned_of(tmp_path):
    proc, _, said = _start(tmp_path, "--demo", "--host", "0.0.0.0")
    _stop(proc)
    assert any("warning: listening on 0.0.0.0, not only this machine" in line for line in said)
    proc, _, said = _start(tmp_path, "--demo")
    _stop(proc)
    assert not any("warning" in line for line in said)
