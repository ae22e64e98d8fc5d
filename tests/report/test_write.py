"""report.html at the end of every run: written for a finished run and a failed one, never failing a run,
rebuilt by `r3con show`; and the notebook summary of a RunResult, escaped."""

import dataclasses
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import r3con
from r3con.cli import main
from r3con.evidence.citations import Evidence
from r3con.pipeline.method import run
from r3con.report import write_report
from r3con.testing import FakeLLMServer, FaultPlan

from ..conftest import r3con_cli
from .hostile import HOSTILE_REPLY

FIXTURES = Path(__file__).parents[1] / "fixtures" / "evidence"
QUESTION = "Who sailed on the Demeter, what cargo did it carry, and who holds the company's shares?"


def _payload(page: str) -> dict:
    start = page.index('<script type="application/json" id="r3con-data">') + len('<script type="application/json" id="r3con-data">')
    return json.loads(page[start:page.index("</script>", start)])


async def test_a_finished_run_writes_a_private_report_with_its_answer_evidence_and_documents(tmp_path):
    docs = r3con.load_documents(sorted(FIXTURES.glob("*.txt")))
    with FakeLLMServer() as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="sk-secret", out_dir=tmp_path)
        result = await run(QUESTION, docs, settings)
    assert result.report == result.run_dir / "report.html" and result.report_error is None
    assert stat.S_IMODE(result.report.stat().st_mode) == 0o600
    page = result.report.read_text(encoding="utf-8")
    data = _payload(page)
    assert data["question"] == QUESTION and data["answer"] == result.answer
    assert [e["id"] for e in data["evidence"]] == [e.id for e in result.evidence] and data["evidence"]
    assert set(data["texts"]) == {str(d.number) for d in docs} and data["texts"][str(docs[0].number)] == docs[0].text
    assert data["rounds"] == 2 and all(len(v) == 2 for v in data["notes"].values())
    assert sum(map(len, data["records"].values())) == sum(map(len, result.records.values()))
    assert "sk-secret" not in page


async def test_a_failed_run_still_writes_a_report_with_what_it_did_and_why_it_stopped(tmp_path):
    docs = r3con.load_documents(sorted(FIXTURES.glob("*.txt")))
    with FakeLLMServer(faults=FaultPlan.parse("500=1.0,max=1000,only=populate")) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path, retries=0)
        ends: list[r3con.RunEnd] = []
        with pytest.raises(r3con.RunFailed) as failed:
            await run(QUESTION, docs, settings, on_end=ends.append)
    [end] = ends
    report = end.report
    assert end.error is failed.value and report is not None and report.parent == end.run_dir and end.report_error is None
    data = _payload(report.read_text(encoding="utf-8"))
    assert data["error"]["stage"] == "populate" and data["answer"] is None
    assert data["rounds"] == 2 and data["schema_tables"], "the notes and schema it made are in the report"


async def test_a_report_that_cannot_be_written_never_fails_the_run(tmp_path, monkeypatch):
    def broken(data):
        raise RuntimeError("template missing")

    monkeypatch.setattr("r3con.report.render_pieces", broken)
    docs = r3con.load_documents(sorted(FIXTURES.glob("*.txt")))
    with FakeLLMServer() as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path)
        result = await run(QUESTION, docs, settings)
    assert result.answer and result.report is None
    assert result.report_error == f"report not written in {result.run_dir}: RuntimeError: template missing"
    assert not (result.run_dir / "report.html").exists() and (result.run_dir / "result.json").is_file()


def test_the_cli_prints_the_report_line_or_one_warning(tmp_path, monkeypatch, capsys, clean_env):
    with FakeLLMServer() as server:
        args = ["r3con", "run", QUESTION, str(FIXTURES), "--base-url", server.base_url, "--out", str(tmp_path)]
        monkeypatch.setattr(sys, "argv", args)
        with pytest.raises(SystemExit) as exited:
            main()
        assert not exited.value.code
        err = capsys.readouterr().err
        (folder,) = tmp_path.iterdir()
        assert f"report:\n  {folder / 'report.html'}\n" in err  # the path on a line of its own
        monkeypatch.setattr("r3con.report.render_pieces", lambda data: 1 / 0)
        with pytest.raises(SystemExit) as exited:
            main()
        assert not exited.value.code, "the run succeeded; its report did not"
    err = capsys.readouterr().err
    assert not [line for line in err.splitlines() if line.startswith("report:")]
    assert len([line for line in err.splitlines() if line.startswith("r3con: warning: report not written in ")]) == 1
    assert "ZeroDivisionError" in err and "Traceback" not in err


def test_show_rebuilds_the_report_and_opens_it_in_the_browser(tmp_path):
    with FakeLLMServer() as server:
        proc = r3con_cli("run", QUESTION, str(FIXTURES), "--base-url", server.base_url, "--out", str(tmp_path), "-q")
    assert proc.returncode == 0, proc.stderr
    (folder,) = tmp_path.iterdir()
    (folder / "report.html").unlink()
    opened = tmp_path / "opened.txt"
    browser = f"{sys.executable} -c \"import sys; open({str(opened)!r}, 'w').write(sys.argv[1])\" %s"
    shown = r3con_cli("show", str(folder), "--open", env={"BROWSER": browser})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == str(folder / "report.html") and (folder / "report.html").is_file()
    assert opened.read_text() == (folder / "report.html").resolve().as_uri()
    missing = r3con_cli("show", str(tmp_path / "nothing-here"))
    assert missing.returncode == 2 and missing.stderr.startswith("r3con: error: ") and "not a run folder" in missing.stderr


def test_show_reads_a_run_folder_broken_halfway(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "manifest.json").write_text('{"task": "Who?", "documents": [')  # a run killed while writing
    (folder / "notes").mkdir()
    (folder / "notes" / "round-1.json").write_text('[{"doc": "1", "note": "A note."}]')
    page = write_report(folder).read_text(encoding="utf-8")
    data = _payload(page)
    assert data["notes"]["1"][0]["note"] == "A note." and data["problems"][0].startswith("manifest.json: could not be read")


async def test_the_notebook_summary_shows_the_answer_and_evidence_escaped(tmp_path):
    docs = r3con.load_documents(sorted(FIXTURES.glob("*.txt")))
    with FakeLLMServer() as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path)
        result = await run(QUESTION, docs, settings)
    html = result._repr_html_()
    assert result.evidence[0].id in html and "Evidence" in html and str(result.report) in html
    hostile = dataclasses.replace(result, answer=HOSTILE_REPLY, evidence=(
        Evidence(id="R1.1.1", kind="record", doc=1, title="<b>t</b>", passage=HOSTILE_REPLY, span=None, match="none"),))
    html = hostile._repr_html_()
    assert "<script" not in html and "<img" not in html and "<a " not in html and "<b>" not in html
    assert "&lt;script&gt;" in html and "not found in the document" in html
    assert "Report:" not in dataclasses.replace(result, report=None)._repr_html_()


def test_the_report_assets_ship_with_the_package():
    from importlib import resources

    names = {p.name for p in resources.files("r3con.report").joinpath("templates").iterdir()}
    assert {"report.html.j2", "report.js", "report.css", "summary.html.j2"} <= names
    assert os.access(Path(str(resources.files("r3con.report"))) / "templates" / "report.js", os.R_OK)


def test_an_interrupted_run_leaves_a_report_of_what_it_did_and_says_where(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    with FakeLLMServer(faults=FaultPlan.parse("delay=0.2")) as server:
        proc = subprocess.Popen([sys.executable, "-m", "r3con", "run", QUESTION, str(FIXTURES), "--base-url",
                                 server.base_url, "--out", str(tmp_path), "--concurrency", "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(tmp_path.glob("*/calls.jsonl")):
            time.sleep(0.02)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    (folder,) = tmp_path.iterdir()
    assert err.splitlines()[-2:] == ["report:", f"  {folder / 'report.html'}"]
    data = _payload((folder / "report.html").read_text(encoding="utf-8"))
    assert data["error"]["kind"] == "interrupted" and data["calls"] >= 1
