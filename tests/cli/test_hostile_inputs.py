"""What a folder can hold, through `r3con run`: special files, links, hostile names and hostile content.

Every case ends with exit 0 (1 with --strict when the input is not fully used), the input listed once in
the right category, one line that names it, nothing written that cannot be read back, no internal error,
and no hang: each run has a time limit (`within`).
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ..conftest import cli_in_process
from ._hostile import unix_socket, weird_name, within

QUESTION = "How old are the people named?"
GOOD = "Registry\n\nAnn Lee is 34 years old and lives in Oslo.\n"
LIMIT_S = 60  # far above what a run over two tiny files takes; a pipe opened for reading never ends


def _fifo(docs: Path, name: str) -> str:
    os.mkfifo(docs / name)
    return name


def _link(docs: Path, name: str, target: str | Path) -> str:
    os.symlink(target, docs / name)
    return name


def _write(docs: Path, name: str, data: bytes) -> str:
    (docs / name).write_bytes(data)
    return name


def _nested(docs: Path, rel: str, data: bytes) -> str:
    (docs / rel).parent.mkdir(parents=True, exist_ok=True)
    (docs / rel).write_bytes(data)
    return rel


def _raw_name(docs: Path, raw: bytes, data: bytes = b"Bob Stone is 41 years old.\n") -> str:
    path = weird_name(docs, raw)
    path.write_bytes(data)
    return path.name


def _report(docs: Path, rel: str, fake_server, tmp_path: Path) -> str:
    """A report.html that r3con wrote (a real run's, copied in as a user would keep it)."""
    runs = tmp_path / "earlier-runs"
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "x.txt").write_text(GOOD)
    proc = cli_in_process("run", QUESTION, str(seed), "--base-url", fake_server.base_url, "--out", str(runs),
                          "--rounds", "1", "--reasoning", "direct", "-q")
    assert proc.returncode == 0, proc.stderr
    (report,) = runs.glob("*/report.html")
    (docs / rel).parent.mkdir(parents=True, exist_ok=True)
    (docs / rel).write_bytes(report.read_bytes())
    return rel


def _listed(name: str) -> str:
    """How a name is listed: bytes that are not UTF-8 and control characters escaped."""
    from r3con.corpus.names import shown

    return shown(name)


Make = Callable[[Path], str]
# (case, make the hostile file in docs/ -> its name, category, kind or words its entry holds, strict exit code)
FOLDER: list[tuple[str, Make, str, str, int]] = [
    ("named pipe .txt", lambda d: _fifo(d, "pipe.txt"), "skipped", "named pipe", 1),
    ("named pipe without an extension", lambda d: _fifo(d, "pipe"), "skipped", "named pipe", 1),
    ("named pipe .pdf", lambda d: _fifo(d, "scan.pdf"), "skipped", "named pipe", 1),
    ("named pipe .csv", lambda d: _fifo(d, "rows.csv"), "skipped", "named pipe", 1),
    ("unix socket", lambda d: unix_socket(d / "s.txt").name, "skipped", "socket", 1),
    ("link to /dev/zero", lambda d: _link(d, "zero.txt", "/dev/zero"), "skipped", "device", 1),
    ("link to /dev/null", lambda d: _link(d, "null.md", "/dev/null"), "skipped", "device", 1),
    ("link to /dev/urandom", lambda d: _link(d, "noise.json", "/dev/urandom"), "skipped", "device", 1),
    ("link to a named pipe", lambda d: (_fifo(d, "zz"), _link(d, "via.txt", d / "zz"))[1], "skipped", "named pipe", 1),
    ("link to itself", lambda d: _link(d, "self.txt", d / "self.txt"), "unreadable", "loops back on itself", 1),
    ("dangling link to a markdown file", lambda d: _link(d, "gone.md", d / "moved.md"), "unreadable",
     "which does not exist", 1),
    ("dangling relative link", lambda d: _link(d, "rel.txt", "../nowhere/x.txt"), "unreadable", "which does not exist", 1),
    ("link into a missing folder", lambda d: _link(d, "deep.txt", d / "no" / "such" / "x.txt"), "unreadable",
     "which does not exist", 1),
    ("latin-1 file name", lambda d: _raw_name(d, b"caf\xe9.txt"), "read", "", 0),
    ("file name of invalid UTF-8", lambda d: _raw_name(d, b"\xff\xfe\xfdname.md"), "read", "", 0),
    ("file name with a newline", lambda d: _raw_name(d, b"two\nlines.txt"), "read", "", 0),
    ("file name with a right-to-left override", lambda d: _raw_name(d, "evil\u202etxt.md".encode()), "read", "", 0),
    ("non-UTF-8 name of an unsupported file", lambda d: _raw_name(d, b"r\xe9sum\xe9.pptx", b"PK\x03\x04"), "skipped",
     "unsupported .pptx", 1),
    ("non-UTF-8 name of a named pipe", lambda d: (os.mkfifo(weird_name(d, b"p\xe9.txt")), weird_name(d, b"p\xe9.txt").name)[1],
     "skipped", "named pipe", 1),
    ("JSON nested 100,000 deep", lambda d: _write(d, "deep.json", b"[" * 100_000 + b"]" * 100_000), "read",
     "JSON nested deeper than 500 levels; read as plain text", 1),
    ("JSON object nested 50,000 deep", lambda d: _write(d, "obj.json", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
     "read", "JSON nested deeper", 1),
    ("JSON Lines with one line nested too deep", lambda d: _write(d, "log.jsonl", b'{"a": 1}\n' + b"[" * 20_000 + b"]" * 20_000 + b"\n"),
     "read", "line 2 not valid JSON (nested deeper than 500 levels)", 1),
    ("JSON holding a lone surrogate", lambda d: _write(d, "sur.json", b'{"name": "Ann \\ud800 Lee", "age": 34}'), "read", "", 0),
    ("20 KB text with one stray NUL", lambda d: _write(d, "nul.txt", b"Notes\n\n" + b"Cid Holm is 29. " * 1300 + b"\x00" + b"end."),
     "read", "1 stray NUL byte dropped (the first at byte 20,807)", 1),
    ("text with a few NULs", lambda d: _write(d, "nuls.md", b"# Log\n\n" + b"Dee is 52.\x00 " * 3 + b"ok " * 500), "read",
     "3 stray NUL bytes dropped", 1),
    ("CSV with a stray NUL", lambda d: _write(d, "t.csv", b"name,age\nAnn,34\nBob,4\x001\n" + b"Cid,29\n" * 100), "read",
     "stray NUL byte dropped", 1),
    ("binary named .txt", lambda d: _write(d, "blob.txt", b"\x89PNG\r\n\x1a\n" + bytes(200)), "skipped", "binary", 1),
    ("UTF-16 LE without a BOM", lambda d: _write(d, "w.txt", "Ærlig talt, sa Åse (41).\n".encode("utf-16-le") * 30),
     "read", "utf-16-le", 0),
    ("UTF-16 BE without a BOM", lambda d: _write(d, "wb.md", "# Ages\n\nEva is 23.\n".encode("utf-16-be") * 30), "read",
     "utf-16-be", 0),
    ("UTF-32 LE without a BOM", lambda d: _write(d, "q.txt", "Finn is 61 years old.\n".encode("utf-32-le") * 30), "read",
     "utf-32-le", 0),
    ("UTF-32 BE without a BOM", lambda d: _write(d, "qb.txt", "Gus is 70 years old.\n".encode("utf-32-be") * 30), "read",
     "utf-32-be", 0),
    ("UTF-16 JSON without a BOM", lambda d: _write(d, "w.json", '{"who": "Hal", "age": 33}'.encode("utf-16-le")), "read",
     "utf-16-le", 0),
    ("UTF-16 with a BOM", lambda d: _write(d, "bom.txt", codecs.BOM_UTF16_LE + "Ida is 19.\n".encode("utf-16-le")), "read",
     "utf-16", 0),
]


def _run(docs: Path, tmp_path: Path, fake_server, *extra: str):
    with within(LIMIT_S):
        return cli_in_process("run", QUESTION, str(docs), "--base-url", fake_server.base_url, "--out",
                              str(tmp_path / "runs"), "--json", "--reasoning", "direct", "--rounds", "1", *extra)


def _entries(inputs: dict, name: str) -> list[tuple[str, dict]]:
    return [(category, e) for category in ("read", "skipped", "unreadable", "duplicates", "excluded")
            for e in inputs[category] if Path(e["source"]).name == name or e["source"].endswith("/" + name)]


@pytest.mark.parametrize("case, make, category, says, strict_code", FOLDER, ids=[c[0] for c in FOLDER])
def test_a_hostile_file_in_a_folder_is_listed_once_and_the_run_goes_on(case, make, category, says, strict_code,
                                                                        fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text(GOOD)
    name = make(docs)
    proc = _run(docs, tmp_path, fake_server, "--strict")
    assert proc.returncode == strict_code, proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    entries = _entries(data["inputs"], _listed(name))
    assert [c for c, _ in entries] == [category], (entries, data["inputs"])
    entry = entries[0][1]
    assert says in json.dumps(entry, ensure_ascii=False), entry
    if category == "skipped" and says != "binary" and not says.startswith("unsupported"):
        assert entry["kind"] == says
    manifest = (Path(data["run_dir"]) / "manifest.json").read_text(encoding="utf-8")
    assert json.loads(manifest)["inputs"] == data["inputs"], "the manifest keeps the same account"
    problems = [line for line in proc.stderr.splitlines() if line.startswith(("warning:", "r3con: error"))]
    if strict_code:
        (line,) = problems
        assert _listed(name).split("/")[-1] in line
    else:
        assert problems == []


def test_a_folder_of_every_special_file_at_once_reads_the_good_ones(fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text(GOOD)
    _fifo(docs, "a-pipe.txt")
    unix_socket(docs / "b-sock.txt")
    _link(docs, "c-zero.txt", "/dev/zero")
    _link(docs, "d-loop1.txt", docs / "d-loop2.txt")
    _link(docs, "d-loop2.txt", docs / "d-loop1.txt")
    _link(docs, "e-dangling.txt", docs / "nowhere.txt")
    _raw_name(docs, b"f-caf\xe9.txt")
    proc = _run(docs, tmp_path, fake_server)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["documents"] == 2
    summary = [line for line in proc.stderr.splitlines() if line.startswith("inputs:")]
    assert summary == ["inputs: 2 read, 3 skipped (1 named pipe, 1 socket, 1 device), 3 unreadable"]
    run_dir = Path(data["run_dir"])
    for name in ("manifest.json", "documents.jsonl", "result.json", "report.html"):
        text = (run_dir / name).read_text(encoding="utf-8")  # every file reads back as UTF-8
        if name != "result.json":
            assert "f-caf\\\\xe9" in text or "f-caf\\xe9" in text, name


# (case, make the path -> its name, words the one error line holds)
DIRECT: list[tuple[str, Make, str]] = [
    ("named pipe", lambda d: _fifo(d, "pipe.txt"), "is a named pipe (FIFO), not a document"),
    ("socket", lambda d: unix_socket(d / "s.sock").name, "is a socket, not a document"),
    ("link to /dev/zero", lambda d: _link(d, "zero.txt", "/dev/zero"), "is a character device (a link to /dev/zero)"),
    ("/dev/null by a link", lambda d: _link(d, "null", "/dev/null"), "is a character device (a link to /dev/null)"),
    ("symlink loop", lambda d: (_link(d, "l1", d / "l2"), _link(d, "l2", d / "l1"))[0], "loops back on itself"),
    ("dangling link", lambda d: _link(d, "gone.txt", d / "moved.txt"), "which does not exist"),
    ("missing file with a non-UTF-8 name", lambda d: weird_name(d, b"missing-\xe9.txt").name,
     "no such file or folder: "),
]


@pytest.mark.parametrize("command", ["run", "estimate"])
@pytest.mark.parametrize("case, make, says", DIRECT, ids=[c[0] for c in DIRECT])
def test_a_special_path_given_directly_is_refused_as_what_it_is(case, make, says, command, fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    path = docs / make(docs)
    extra = ("--base-url", fake_server.base_url, "--out", str(tmp_path / "runs")) if command == "run" else ()
    with within(LIMIT_S):
        proc = cli_in_process(command, QUESTION, str(path), *extra)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("r3con: error: ") and says in line, line
    assert "pass " in line, "the line says what to do"
    assert not (tmp_path / "runs").exists(), "nothing was started"


def test_a_glob_that_matches_a_pipe_skips_it(fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text(GOOD)
    _fifo(docs, "pipe.txt")
    with within(LIMIT_S):
        proc = cli_in_process("run", QUESTION, str(docs / "*.txt"), "--base-url", fake_server.base_url, "--out",
                              str(tmp_path / "runs"), "--json", "--reasoning", "direct", "--rounds", "1")
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads(proc.stdout)["inputs"]["skipped"]
    assert entry["kind"] == "named pipe" and entry["source"].endswith("pipe.txt")


@pytest.mark.parametrize("where", ["report.html", "old/deeper/report.html", "kept-report.htm"])
def test_a_report_r3con_wrote_is_left_out_of_a_walk_wherever_it_is(where, fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text(GOOD)
    _report(docs, where, fake_server, tmp_path)
    proc = _run(docs, tmp_path, fake_server)
    assert proc.returncode == 0, proc.stderr
    inputs = json.loads(proc.stdout)["inputs"]
    assert [e["rule"] for e in inputs["excluded"]] == ["r3con report"]
    assert inputs["excluded"][0]["source"].endswith(where)
    assert len(inputs["read"]) == 1


def test_a_users_own_page_titled_r3con_is_still_read(fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.html").write_text("<html><head><title>r3con: my notes</title></head>"
                                     "<body><p>Ann Lee is 34 years old.</p></body></html>")
    proc = _run(docs, tmp_path, fake_server)
    assert proc.returncode == 0, proc.stderr
    assert [Path(r["source"]).name for r in json.loads(proc.stdout)["inputs"]["read"]] == ["notes.html"]


@pytest.mark.parametrize("target", ["plain folder", "file", "missing", "documents folder"])
def test_show_writes_only_into_run_folders(target, tmp_path, corpus):
    path = {"plain folder": tmp_path / "plain", "file": tmp_path / "a.txt", "missing": tmp_path / "nope",
            "documents folder": corpus}[target]
    if target == "plain folder":
        path.mkdir()
    elif target == "file":
        path.write_text("x")
    before = sorted(p.name for p in path.iterdir()) if path.is_dir() else None
    proc = cli_in_process("show", str(path))
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "is not a run folder" in line and "report.html only into run folders" in line
    if before is not None:
        assert sorted(p.name for p in path.iterdir()) == before, "nothing written there"


def test_show_rewrites_the_report_of_a_run_folder(fake_server, tmp_path, corpus):
    proc = cli_in_process("run", QUESTION, str(corpus), "--base-url", fake_server.base_url, "--out",
                          str(tmp_path / "runs"), "-q", "--rounds", "1", "--reasoning", "direct")
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    (run_dir / "report.html").unlink()
    shown = cli_in_process("show", str(run_dir))
    assert shown.returncode == 0, shown.stderr
    assert (run_dir / "report.html").read_text().count('<meta name="generator" content="r3con">') == 1
