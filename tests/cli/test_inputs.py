"""`r3con run` on folders as users have them: every input accounted for, warned about, and `--strict`."""

import io
import json
from pathlib import Path

import pytest

from r3con.cli._inputs import issues_text, summary_line
from r3con.corpus.inputs import DegradedInput, Inputs, ReadInput
from r3con.corpus.readers import READABLE
from r3con.testing import FakeLLMServer, FaultPlan

from ..bad_inputs import LATIN, assert_every_file_accounted, blank_pdf, categories, docx_bytes, messy_folder
from ..conftest import cli_in_process

QUESTION = "How old are the people named?"
FAST_RETRIES = {"R3CON_RETRY_BASE_S": "0.001"}


def stderr_lines(proc) -> list[str]:
    """stderr's lines, a closing line wrapped at 80 columns joined again."""
    return [line for line in proc.stderr.replace("\n  ", " ").splitlines() if line.strip()]


def one_line(proc, prefix: str) -> str:
    (line,) = [line for line in stderr_lines(proc) if line.startswith(prefix)]
    return line


def test_a_messy_folder_is_accounted_for_and_named_in_one_warning(fake_server, tmp_path):
    docs = tmp_path / "docs"
    expected = messy_folder(docs)
    proc = cli_in_process("run", QUESTION, str(docs), "--base-url", fake_server.base_url, "--out", str(tmp_path / "runs"),
                     "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert_every_file_accounted(data["inputs"], docs, expected)
    assert data["documents"] == 5 and data["inputs"]["degraded"] == []
    manifest = json.loads((Path(data["run_dir"]) / "manifest.json").read_text())
    assert manifest["inputs"] == data["inputs"]
    assert one_line(proc, "inputs:") == (
        "inputs: 5 read (1 decoded as cp1252; 2 with a warning), 6 skipped (2 empty, 1 binary, "
        "1 unsupported .png, 1 no text layer, 1 unsupported .pptx), 2 unreadable, 1 duplicate (read once), "
        "7 excluded (2 virtualenv, 2 r3con runs, 1 version control, 1 dependencies, 1 hidden)")
    warning = one_line(proc, "warning:")
    assert warning.startswith("warning: 10 inputs not fully used: broken.pdf (cannot read the PDF: ")
    assert warning.endswith(f"and 7 more; full list: {data['run_dir']}/manifest.json; --strict makes this an error")
    assert "Traceback" not in proc.stderr and "EOF marker" not in proc.stderr
    run_text = "".join(p.read_text(errors="replace") for p in Path(data["run_dir"]).rglob("*") if p.is_file())
    assert "sk-secret" not in run_text and "an earlier answer" not in run_text and "a commit message" not in run_text


def test_strict_exits_1_after_writing_everything(fake_server, tmp_path):
    docs = tmp_path / "docs"
    messy_folder(docs)
    proc = cli_in_process("run", QUESTION, str(docs), "--base-url", fake_server.base_url, "--out", str(tmp_path / "runs"),
                     "--strict", "--quiet")
    assert proc.returncode == 1, proc.stderr
    (line,) = stderr_lines(proc)
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert line.startswith("r3con: error: --strict: 10 inputs not fully used: broken.pdf (")
    assert line.endswith(f"and 7 more; full list: {run_dir}/manifest.json")
    assert {"answer.txt", "result.json", "manifest.json"} <= {p.name for p in run_dir.iterdir()}
    assert len(json.loads((run_dir / "result.json").read_text())["inputs"]["skipped"]) == 6
    assert proc.stdout.startswith((run_dir / "answer.txt").read_text().strip()), "the run's answer is still printed"


def test_a_clean_folder_passes_strict_without_a_warning(fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old.")
    (docs / "b.md").write_text("# Letter\n\nBob Stone, aged 41.")
    proc = cli_in_process("run", QUESTION, str(docs), "--base-url", fake_server.base_url, "--out", str(tmp_path / "runs"),
                     "--strict")
    assert proc.returncode == 0, proc.stderr
    assert one_line(proc, "inputs:") == "inputs: 2 read"
    assert not [line for line in stderr_lines(proc) if line.startswith(("warning:", "r3con: error"))]


def test_a_run_inside_the_documents_folder_never_reads_its_own_runs(fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old.")
    (docs / ".env.txt").write_text("OPENAI_API_KEY=sk-secret")
    (docs / ".git").mkdir()
    (docs / ".git" / "HEAD.txt").write_text("ref: main")
    counts = []
    for _ in range(3):  # the default ./r3con-runs, then a custom --out: both stay out
        proc = cli_in_process("run", QUESTION, ".", "--base-url", fake_server.base_url, "--json", "--quiet", cwd=docs)
        assert proc.returncode == 0, proc.stderr
        counts.append(json.loads(proc.stdout)["documents"])
    cli_in_process("run", QUESTION, ".", "--base-url", fake_server.base_url, "--quiet", "--out", "mine", cwd=docs)
    (earlier,) = (docs / "mine").iterdir()  # a run folder under another name: known by its manifest
    proc = cli_in_process("run", QUESTION, ".", "--base-url", fake_server.base_url, "--json", "--out", "mine", cwd=docs)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert counts == [1, 1, 1] and data["documents"] == 1
    assert {e["source"]: e["rule"] for e in data["inputs"]["excluded"]} == {
        ".git": "version control", f"mine/{earlier.name}": "r3con runs", "r3con-runs": "r3con runs",
        ".env.txt": "hidden"}
    assert one_line(proc, "inputs:") == (
        "inputs: 1 read, 4 excluded (2 r3con runs, 1 version control, 1 hidden)")


def test_exclude_and_include_hidden_are_counted(fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old.")
    (docs / "people.csv").write_text("name,age\nBob,41\n")
    (docs / ".notes.md").write_text("# Notes\n\nCid is 29.")
    (docs / "drafts").mkdir()
    (docs / "drafts" / "d.txt").write_text("draft")
    proc = cli_in_process("run", QUESTION, str(docs), "--base-url", fake_server.base_url, "--out", str(tmp_path / "runs"),
                     "--include-hidden", "--exclude", "*.csv", "--exclude", "drafts", "--json")
    assert proc.returncode == 0, proc.stderr
    inputs = json.loads(proc.stdout)["inputs"]
    assert sorted(Path(r["source"]).name for r in inputs["read"]) == [".notes.md", "a.txt"]
    assert sorted((Path(e["source"]).name, e["rule"]) for e in inputs["excluded"]) == [
        ("drafts", "--exclude drafts"), ("people.csv", "--exclude *.csv")]
    assert one_line(proc, "inputs:") == "inputs: 2 read, 2 excluded (1 --exclude drafts, 1 --exclude *.csv)"


@pytest.mark.parametrize("strict", [False, True])
def test_documents_degraded_by_server_errors_are_named(strict, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"person-{i:02}.txt").write_text(f"Person {i}\n\nPerson {i} is {20 + i} years old and lives in Oslo.")
    env = {**FAST_RETRIES, "R3CON_MAX_FAILED_SHARE": "0.95"}
    with FakeLLMServer(port=0, faults=FaultPlan.parse("500=0.4,only=populate,max=1000,seed=3")) as server:
        proc = cli_in_process("run", QUESTION, str(docs), "--base-url", server.base_url, "--out", str(tmp_path / "runs"),
                         "--retries", "0", "--no-cache", "--json", *(["--strict"] if strict else []), env=env)
    assert proc.returncode == (1 if strict else 0), proc.stderr
    data = json.loads(proc.stdout)
    degraded = data["inputs"]["degraded"]
    assert 1 <= len(degraded) < 12
    assert [d["doc"] for d in degraded] == [d["doc"] for d in data["degraded"]]
    assert all(d["stage"] == "populate" and "500" in d["cause"] for d in degraded)
    assert f"{len(degraded)} degraded in populate" in one_line(proc, "inputs:")
    n = len(degraded)
    keys = ", ".join(d["doc"] for d in degraded[:5]) + (f" and {n - 5} more" if n > 5 else "")
    line = one_line(proc, "r3con: error: --strict:" if strict else "warning:")
    assert f"{n} input{'s' * (n > 1)} not fully used: document{'s' * (n > 1)} {keys} degraded in populate (" in line
    assert "HTTP 500" in line
    assert f"full list: {data['run_dir']}/manifest.json" in line
    manifest = json.loads((Path(data["run_dir"]) / "manifest.json").read_text())
    assert manifest["inputs"]["degraded"] == degraded


def test_estimate_reports_the_inputs_too(tmp_path):
    docs = tmp_path / "docs"
    messy_folder(docs)
    proc = cli_in_process("estimate", QUESTION, str(docs), "--model", "gpt-4o-mini", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["documents"] == 5 and len(data["inputs"]["skipped"]) == 6
    assert one_line(proc, "inputs:").startswith("inputs: 5 read (1 decoded as cp1252; 2 with a warning), 6 skipped")


def _mostly_scanned_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    from ..test_corpus import _minimal_pdf

    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(_minimal_pdf("Cover page"))))
    for _ in range(3):
        writer.add_blank_page(width=612, height=792)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


GOOD = "Registry\n\nAnn Lee is 34 years old and lives in Oslo.\n"
RUN_DIR = {"manifest.json": '{"task": "q", "r3con_version": "0.1.0"}', "calls.jsonl": "{}\n", "answer.txt": "old"}
# (case, {path: content}, category, the file or folder it lists, what the line says, exit code with --strict)
BATTERY = [
    ("image-only pdf", {"scan.pdf": blank_pdf(2)}, "skipped", "scan.pdf", "scan.pdf (no text layer: OCR it first (e.g. ocrmypdf))", 1),
    ("empty file", {"empty.txt": ""}, "skipped", "empty.txt", "empty.txt (empty: no text in it)", 1),
    ("white space only", {"blank.md": " \n\t\n"}, "skipped", "blank.md", "blank.md (empty", 1),
    ("html with only a script", {"app.html": "<html><script>var x = 1;</script></html>"}, "skipped", "app.html",
     "app.html (empty", 1),
    ("slides", {"slides.pptx": docx_bytes()}, "skipped", "slides.pptx",
     f"slides.pptx (unsupported .pptx type: r3con reads {READABLE})", 1),
    ("damaged word document", {"report.docx": docx_bytes()}, "unreadable", "report.docx",
     "report.docx (cannot read the .docx file (", 1),
    ("image", {"photo.png": b"\x89PNG\r\n\x1a\n" + bytes(40)}, "skipped", "photo.png", "photo.png (unsupported .png", 1),
    ("no extension", {"LICENSE": "MIT License\n"}, "skipped", "LICENSE", "LICENSE (unsupported (no extension)", 1),
    ("binary .txt with NUL bytes", {"blob.txt": b"PK\x03\x04\x00\x00data\x00"}, "skipped", "blob.txt",
     "blob.txt (binary (NUL bytes): not a text file)", 1),
    ("undecodable .txt", {"noise.txt": bytes(range(128, 256)) * 20}, "skipped", "noise.txt",
     "noise.txt (binary: no text encoding fits its bytes)", 1),
    ("broken pdf", {"broken.pdf": b"%PDF-1.4 not really"}, "unreadable", "broken.pdf", "broken.pdf (cannot read the PDF: ", 1),
    ("dangling link", {"gone.txt": None}, "unreadable", "gone.txt",
     "gone.txt (a link to ", 1),
    ("csv with an unterminated quote", {"people.csv": 'name,age\nAnn,34\n"Bob,41\nCid,29\n'}, "read", "people.csv",
     "people.csv (CSV record at line 3: unterminated quote; read as plain text)", 1),
    ("jsonl with a bad line", {"log.jsonl": '{"a": 1}\n{"b": }\n{"c": 3}\n'}, "read", "log.jsonl",
     "log.jsonl (line 2 not valid JSON (Expecting value); kept as plain text)", 1),
    ("json that does not parse", {"data.json": '{"a": [1, 2}\n'}, "read", "data.json",
     "data.json (not valid JSON (", 1),
    ("mostly scanned pdf", {"book.pdf": _mostly_scanned_pdf()}, "read", "book.pdf",
     "book.pdf (3 of 4 pages have no text layer: OCR it first (e.g. ocrmypdf))", 1),
    ("latin-1 text", {"latin.txt": LATIN.encode("latin-1")}, "read", "latin.txt", "1 decoded as cp1252", 0),
    ("utf-16 text", {"wide.txt": "Ærlig talt, sa Åse.".encode("utf-16")}, "read", "wide.txt", "1 decoded as utf-16", 0),
    ("identical copy", {"z-copy.txt": GOOD}, "duplicates", "z-copy.txt", "1 duplicate (read once)", 0),
    ("hidden secrets", {".env.txt": "OPENAI_API_KEY=sk-secret\n"}, "excluded", ".env.txt", "1 excluded (1 hidden)", 0),
    ("git folder", {".git/HEAD.txt": "ref: main"}, "excluded", ".git", "1 excluded (1 version control)", 0),
    ("node_modules", {"node_modules/p/README.md": "# p\n\ndep"}, "excluded", "node_modules", "1 excluded (1 dependencies)", 0),
    ("__pycache__", {"__pycache__/notes.txt": "cache"}, "excluded", "__pycache__", "1 excluded (1 dependencies)", 0),
    (".venv", {".venv/lib/x.txt": "venv file"}, "excluded", ".venv", "1 excluded (1 virtualenv)", 0),
    ("virtualenv under another name", {"py/pyvenv.cfg": "home = /usr", "py/x.txt": "v"}, "excluded", "py",
     "1 excluded (1 virtualenv)", 0),
    ("earlier r3con-runs", {"r3con-runs/2026-q/answer.txt": "old answer"}, "excluded", "r3con-runs",
     "1 excluded (1 r3con runs)", 0),
    ("run folder under another name", {f"out/2026-q/{k}": v for k, v in RUN_DIR.items()}, "excluded", "out/2026-q",
     "1 excluded (1 r3con runs)", 0),
]


@pytest.mark.parametrize("case, files, category, listed, says, strict_code", BATTERY, ids=[c[0] for c in BATTERY])
def test_each_bad_input_is_listed_once_and_said_in_one_line(case, files, category, listed, says, strict_code,
                                                            fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text(GOOD)
    for rel, content in files.items():
        path = docs / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            path.symlink_to(docs / "moved-away.txt")
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    proc = cli_in_process("run", QUESTION, str(docs), "--base-url", fake_server.base_url, "--out", str(tmp_path / "runs"),
                     "--strict", "--json", "--reasoning", "direct", "--rounds", "1")
    assert proc.returncode == strict_code, proc.stderr
    inputs = json.loads(proc.stdout)["inputs"]
    seen = categories(inputs, docs)
    assert seen.pop(listed) == [category]
    assert seen.pop("good.txt", ["read"]) == ["read"]  # an identical copy makes good.txt the one read
    assert seen == {}, "every file in exactly one category"
    summary = one_line(proc, "inputs:")
    problems = [line for line in stderr_lines(proc) if line.startswith(("warning:", "r3con: error"))]
    if strict_code:
        (line,) = problems
        assert line.startswith("r3con: error: --strict: 1 input not fully used: ") and says in line
        assert line.endswith("/manifest.json")
    else:
        assert says in summary and problems == []


def test_a_folder_with_nothing_readable_exits_2_and_says_why(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "scan.pdf").write_bytes(blank_pdf())
    (docs / ".notes.txt").write_text("hidden notes")
    proc = cli_in_process("run", QUESTION, str(docs), "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "runs"))
    assert proc.returncode == 2
    (line,) = stderr_lines(proc)
    assert line == (f"r3con: error: no readable document in {docs} (scan.pdf: no text layer: OCR it first (e.g. "
                    "ocrmypdf); 1 excluded (hidden, version control, run folders...; see --include-hidden)); "
                    f"supported: {READABLE}")
    assert not (tmp_path / "runs").exists()


def test_the_lines_group_degraded_documents_by_stage_and_count_documents_not_parts():
    inputs = Inputs(read=(ReadInput(1, "a.txt", parts=2), ReadInput(2, "b.txt")), degraded=(
        DegradedInput("1.1", "relevance", "x: giving up after 7 attempts; last error: x answered HTTP 500: boom"),
        DegradedInput("1.2", "relevance", "x: giving up after 7 attempts; last error: x answered HTTP 500: boom"),
        DegradedInput("1.2", "populate", "the reply was not valid JSON"),
        DegradedInput("2", "populate", "the reply was not valid JSON")))
    assert summary_line(inputs) == "inputs: 2 read (3 parts), 2 degraded (1 in relevance, 2 in populate)"
    assert issues_text(inputs, Path("RUN")) == (
        "2 inputs not fully used: document 1 degraded in relevance (x answered HTTP 500: boom), "
        "documents 1, 2 degraded in populate (the reply was not valid JSON); full list: RUN/manifest.json")


def test_a_document_that_failed_in_every_round_is_degraded_once():
    from r3con.results import Failure

    failures = [Failure("relevance", key, f"round {r}: boom", "HTTP 500") for r in (1, 2) for key in ("4", "5")]
    inputs = Inputs(read=tuple(ReadInput(i, f"d{i}.txt") for i in range(1, 6))).with_degraded(failures)
    assert [d.doc for d in inputs.degraded] == ["4", "5"]
    assert issues_text(inputs).startswith("2 inputs not fully used: documents 4, 5 degraded in relevance")
