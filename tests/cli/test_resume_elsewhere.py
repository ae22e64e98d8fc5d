"""Resume keeps the account of every input, works from another working directory, and with --no-cache
pays no answered call again; Ctrl-C while a large file is read or split ends at once and leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from r3con.testing import FakeLLMServer

from ..conftest import cli_in_process
from ._hostile import within

QUESTION = "Who wrote to whom, and when?"
PRICES = {"r3con-scripted": {"input": 1.0, "output": 1.5}}
LIMIT_S = 120


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(port=0) as s:
        yield s


def _workspace(root: Path) -> Path:
    """root/work/docs: letters beside a file it skips, one it cannot read, a duplicate and a hidden one."""
    docs = root / "work" / "docs"
    docs.mkdir(parents=True)
    for i in range(1, 13):
        (docs / f"{i:02d}.txt").write_text(f"Letter {i}\n\n" + f"Ann Lee wrote to Bob Stone on day {i}. " * 30)
    (docs / "slides.pptx").write_bytes(b"PK\x03\x04 not read")
    (docs / ".secret.txt").write_text("hidden")
    (docs / "copy.txt").write_text((docs / "01.txt").read_text())
    os.symlink(docs / "moved.txt", docs / "gone.txt")
    os.mkfifo(docs / "pipe.txt")
    (root / "prices.json").write_text(json.dumps(PRICES))
    return docs


def _chat_calls(server) -> int:
    return sum(1 for c in server.calls() if str(c.get("path", "")).endswith("/chat/completions"))


def _start(server, root: Path, *extra: str):
    """The first run, from root/work, with relative paths."""
    with within(LIMIT_S):
        return cli_in_process("run", QUESTION, "docs", "--base-url", server.base_url, "--out", "../runs",
                              "--prices", str(root / "prices.json"), "--no-cache", "--json", "-q", *extra,
                              cwd=root / "work")


def _resume(server, folder: Path, cwd: Path, *extra: str):
    with within(LIMIT_S):
        return cli_in_process("run", "--resume", str(folder), "--base-url", server.base_url, "--no-cache", "--json",
                              *extra, cwd=cwd)


def _account(inputs: dict) -> dict[str, list[tuple[str, str]]]:
    """Each category's (file name, kind or rule): what the account says of each input, wherever it was read from."""
    out: dict[str, list[tuple[str, str]]] = {}
    for category in ("skipped", "unreadable", "duplicates", "excluded"):
        out[category] = sorted((Path(e["source"]).name, e.get("kind") or e.get("rule") or "") for e in inputs[category])
    out["read"] = sorted((Path(e["source"]).name, "") for e in inputs["read"])
    return out


def test_a_resumed_run_keeps_the_account_of_every_input_through_every_resume(server, tmp_path):
    _workspace(tmp_path)
    first = _start(server, tmp_path)
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    folder = tmp_path / "runs" / Path(data["run_dir"]).name
    before = _account(data["inputs"])
    assert before["skipped"] == [("pipe.txt", "named pipe"), ("slides.pptx", "unsupported .pptx")]
    assert [n for n, _ in before["unreadable"]] == ["gone.txt"] and before["excluded"] == [(".secret.txt", "hidden")]
    assert [n for n, _ in before["duplicates"]] == ["copy.txt"]
    for _ in range(2):
        again = _resume(server, folder, tmp_path / "work", "-q")
        assert again.returncode == 0, again.stderr
        assert _account(json.loads(again.stdout)["inputs"]) == before
        manifest = json.loads((folder / "manifest.json").read_text())
        assert _account(manifest["inputs"]) == before
    summary = [line for line in _resume(server, folder, tmp_path / "work").stderr.replace("\n  ", " ").splitlines()
               if line.startswith("inputs:")]
    assert summary == ["inputs: 12 read, 2 skipped (1 named pipe, 1 unsupported .pptx), 1 unreadable, "
                       "1 duplicate (read once), 1 excluded (1 hidden)"]


def test_a_run_started_with_relative_paths_resumes_from_another_folder_and_says_where_it_read(server, tmp_path):
    _workspace(tmp_path)
    first = _start(server, tmp_path)
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "runs" / Path(json.loads(first.stdout)["run_dir"]).name
    manifest = json.loads((folder / "manifest.json").read_text())
    assert all(Path(d["path"]).is_absolute() and d["sha256"] for d in manifest["documents"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    calls = _chat_calls(server)
    again = _resume(server, folder, elsewhere)
    assert again.returncode == 0, again.stderr
    assert _chat_calls(server) == calls, "every call was answered before: none is sent again"
    (line,) = [line for line in again.stderr.splitlines() if "another folder" in line]
    assert str(tmp_path / "work" / "docs") in line and "content hashes" in line
    assert json.loads(again.stdout)["answer"] == json.loads(first.stdout)["answer"]


def test_a_document_changed_since_is_refused_even_from_another_folder(server, tmp_path):
    docs = _workspace(tmp_path)
    first = _start(server, tmp_path)
    folder = tmp_path / "runs" / Path(json.loads(first.stdout)["run_dir"]).name
    (docs / "05.txt").write_text("Letter 5\n\nSomething else entirely.")
    again = _resume(server, folder, tmp_path, "-q")
    assert again.returncode == 2, again.stderr
    (line,) = again.stderr.strip().splitlines()
    assert "05.txt changed since its run" in line and "start a new run instead" in line


def test_a_document_gone_from_both_places_is_named(server, tmp_path):
    docs = _workspace(tmp_path)
    first = _start(server, tmp_path)
    folder = tmp_path / "runs" / Path(json.loads(first.stdout)["run_dir"]).name
    (docs / "07.txt").unlink()
    again = _resume(server, folder, tmp_path, "-q")
    assert again.returncode == 2, again.stderr
    (line,) = again.stderr.strip().splitlines()
    assert "its document docs/07.txt is gone" in line and "put it back" in line


def test_with_no_cache_a_raised_cap_pays_only_the_calls_not_answered(server, tmp_path):
    _workspace(tmp_path)
    full_run = _start(server, tmp_path)
    assert full_run.returncode == 0, full_run.stderr
    full = json.loads(full_run.stdout)["usage"]
    capped = _start(server, tmp_path, "--max-cost", f"{full['cost_usd'] / 2:.6f}")
    assert capped.returncode == 1, capped.stderr
    (line,) = capped.stderr.strip().splitlines()
    assert "answered calls are not paid again" in line or "--resume" in line
    folder = max((tmp_path / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    spent = json.loads((folder / "usage.json").read_text())
    calls = _chat_calls(server)
    again = _resume(server, folder, tmp_path / "work", "-q", "--max-cost", f"{full['cost_usd'] * 1.5:.6f}")
    assert again.returncode == 0, again.stderr
    paid = json.loads(again.stdout)["usage"]
    assert paid["cost_usd"] == pytest.approx(full["cost_usd"] - spent["cost_usd"], rel=0.05), "only the rest"
    assert _chat_calls(server) - calls == paid["calls"] < full["calls"]
    assert paid["cache_hits"] >= spent["calls"] - 2  # a call cut by the cap is asked again


def _latin1_workspace(root: Path) -> Path:
    """root/work/docs: a letter whose name is Latin-1 (the byte \\xe9, not UTF-8) beside an ordinary one."""
    docs = root / "work" / "docs"
    docs.mkdir(parents=True)
    try:
        fd = os.open(os.fsencode(docs) + b"/caf\xe9.txt", os.O_WRONLY | os.O_CREAT, 0o644)
    except OSError as exc:  # a file system that allows only UTF-8 names (macOS)
        pytest.skip(f"this file system refuses a name that is not UTF-8: {exc}")
    with os.fdopen(fd, "w") as f:
        f.write("Letter from the cafe\n\n" + "Ann Lee wrote to Bob Stone from the cafe on day 3. " * 30)
    (docs / "plain.txt").write_text("Letter 2\n\n" + "Bob Stone wrote back to Ann Lee on day 5. " * 30)
    (root / "prices.json").write_text(json.dumps(PRICES))
    return docs


def _documents(folder: Path) -> list[tuple[str, str]]:
    return [(d["source"], d["sha256"]) for d in json.loads((folder / "manifest.json").read_text())["documents"]]


@pytest.mark.parametrize("where", ["elsewhere", "work"])
def test_a_document_whose_name_is_not_utf8_is_found_again_on_resume(where, server, tmp_path):
    docs = _latin1_workspace(tmp_path)
    first = _start(server, tmp_path)
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "runs" / Path(json.loads(first.stdout)["run_dir"]).name
    before = _documents(folder)
    assert sorted(s for s, _ in before) == ["docs/caf\\xe9.txt", "docs/plain.txt"], "shown escaped"
    (cafe,) = [d for d in json.loads((folder / "manifest.json").read_text())["documents"] if "caf" in d["source"]]
    assert cafe["path"] == f"{docs}/caf\\xe9.txt", "the printable name stays for display"
    cwd = tmp_path / where
    cwd.mkdir(exist_ok=True)
    calls = _chat_calls(server)
    again = _resume(server, folder, cwd)
    assert again.returncode == 0, again.stderr
    assert _chat_calls(server) == calls, "every call was answered before: none is sent again"
    after = _documents(folder)  # from elsewhere, named by the absolute paths they were read at
    assert [(Path(s).name, h) for s, h in after] == [(Path(s).name, h) for s, h in before], "same content hashes"
    read = sorted(e["source"] for e in json.loads(again.stdout)["inputs"]["read"])
    if where == "work":  # found as the run named them
        assert read == ["docs/caf\\xe9.txt", "docs/plain.txt"]
        assert "another folder" not in again.stderr
    else:  # found at the absolute paths, printed escaped
        assert read == [f"{docs}/caf\\xe9.txt", f"{docs}/plain.txt"]
        (line,) = [line for line in again.stderr.splitlines() if "another folder" in line]
        assert f"{docs}/caf\\xe9.txt" in line, "the name it was read at, printed escaped"
    again.stderr.encode("utf-8")  # every line printable: nothing of the raw name leaks out
    assert json.loads(again.stdout)["answer"] == json.loads(first.stdout)["answer"]


def test_a_manifest_without_the_name_bytes_still_resumes_by_its_paths(server, tmp_path):
    _workspace(tmp_path)
    first = _start(server, tmp_path)
    folder = tmp_path / "runs" / Path(json.loads(first.stdout)["run_dir"]).name
    manifest = json.loads((folder / "manifest.json").read_text())
    assert not any("source_b64" in d or "path_b64" in d for d in manifest["documents"]), "only escaped names need them"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = _resume(server, folder, elsewhere, "-q")
    assert again.returncode == 0, again.stderr


def _big_file(folder: Path, megabytes: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "big.txt"
    block = ("The clerk wrote down every name he heard in the harbour that spring. " * 14 + "\n\n").encode()
    with path.open("wb") as f:
        for _ in range(megabytes * 1_000_000 // len(block)):
            f.write(block)
    return path


def _read_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/PID/io to see the file being read")
@pytest.mark.parametrize("command", ["run", "estimate"])
def test_ctrl_c_while_a_large_file_is_split_ends_at_once_and_leaves_nothing(command, server, tmp_path):
    big = _big_file(tmp_path / "docs", 120)
    out = tmp_path / "runs"
    extra = ["--base-url", server.base_url, "--out", str(out), "--no-cache"] if command == "run" else []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    env["R3CON_LOCAL_PORTS"] = ""  # estimate looks for a local server as run does: not the ones others run here
    proc = subprocess.Popen([sys.executable, "-m", "r3con", command, QUESTION, str(big), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while _read_bytes(proc.pid) < big.stat().st_size and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # until the file is read: decoding, hashing and splitting follow
    time.sleep(0.3)
    assert proc.poll() is None, "the work ended before the signal: make the file larger"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("Ctrl-C was not honoured within 10 s")
    took = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert took < 5, f"took {took:.1f} s to stop"  # 2 s on a quiet machine (bench/bench_large_file.py)
    (line,) = err.strip().splitlines()
    assert line.startswith("r3con: interrupted") and "nothing was" in line
    assert not out.exists() or not any(out.iterdir()), "no run folder when nothing was spent"


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/PID/io to see the file being read")
@pytest.mark.parametrize("after_s", [0.0, 0.5])
def test_sigkill_while_a_large_file_is_split_leaves_no_empty_run_folder(after_s, server, tmp_path):
    big = _big_file(tmp_path / "docs", 80)
    out = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    proc = subprocess.Popen([sys.executable, "-m", "r3con", "run", QUESTION, str(big), "--base-url", server.base_url,
                             "--out", str(out), "--no-cache", "-q"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 60
    while _read_bytes(proc.pid) < big.stat().st_size and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(after_s)
    proc.kill()
    proc.wait(timeout=10)
    folders = list(out.iterdir()) if out.exists() else []
    assert all((f / "manifest.json").is_file() for f in folders), "a run folder is made with its manifest, or not at all"


def test_a_resume_keeps_the_numbers_of_documents_in_nested_folders(fake_server, tmp_path, cli):
    """Numbers come from names (a file's path below the folder named); a resume names the files one by one,
    so it keeps the numbers its manifest gave them, and every request is the first attempt's."""
    import json

    for sub, name, text in (("a", "ledger.txt", "Ann Lee, 34, keeps the ledger in Oslo."),
                            ("b", "diary.txt", "Bob Stone, 41, wrote the diary in Bergen.")):
        (tmp_path / "docs" / sub).mkdir(parents=True, exist_ok=True)
        (tmp_path / "docs" / sub / name).write_text(f"{name}\n\n{text}\n")
    runs = tmp_path / "runs"
    first = cli("run", "How old are they?", str(tmp_path / "docs"), "--base-url", fake_server.base_url,
                "--out", str(runs), "--quiet")
    assert first.returncode == 0, first.stderr
    (folder,) = runs.iterdir()
    before = json.loads((folder / "manifest.json").read_text())["documents"]
    asked = len(fake_server.calls())
    again = cli("run", "--resume", str(folder), "--base-url", fake_server.base_url, "--quiet")
    assert again.returncode == 0, again.stderr
    after = json.loads((folder / "manifest.json").read_text())["documents"]
    assert [(d["source"], d["doc"]) for d in after] == [(d["source"], d["doc"]) for d in before]
    assert len(fake_server.calls()) == asked, "the resume's requests are the first attempt's: nothing is sent"
