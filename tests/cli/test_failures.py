"""Failures as a user meets them through `r3con run`: each ends with its own exit code and one line that
says the cause, what to do and where the run folder is; and nothing that was done is lost."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from r3con.artifacts.folder import RunDir
from r3con.cli import main
from r3con.corpus.documents import load_documents
from r3con.pipeline import method as pipeline
from r3con.testing import FakeLLMServer, FaultPlan

from ..conftest import free_port
from ..test_corpus import _minimal_pdf

QUESTION = "How old are the people named?"


def r3con(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    """`r3con ARGS` in this process, through the real entry point: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["r3con", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    out = capsys.readouterr()
    return exited.value.code or 0, out.out, out.err


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def run_folder(runs: Path) -> Path:
    (folder,) = [p for p in runs.iterdir() if p.is_dir()]
    return folder


def calls_logged(folder: Path) -> list[dict]:
    path = folder / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def answered(runs: Path) -> int:
    """Calls answered so far in the run folder under `runs` (0 before it exists)."""
    folders = [p for p in runs.glob("*") if p.is_dir()] if runs.is_dir() else []
    return sum(1 for folder in folders for c in calls_logged(folder) if c.get("error") is None) if folders else 0


def run_args(corpus: Path, base_url: str, runs: Path, *more: str) -> list[str]:
    return ["run", QUESTION, str(corpus), "--base-url", base_url, "--out", str(runs), "--quiet", *more]


# ---- the endpoint fails ---------------------------------------------------------------------------------

def test_a_server_that_always_answers_500_is_named_with_its_words(capsys, monkeypatch, corpus, tmp_path):
    runs = tmp_path / "runs"
    with FakeLLMServer(faults=FaultPlan.parse("500=1.0,max=1000")) as server:
        code, out, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, runs, "--retries", "0"))
        sent = len(server.calls())
    line = one_line(err)
    folder = run_folder(runs)
    assert code == 1 and out == ""
    assert line.startswith("r3con: error: all 3 documents failed in relevance: HTTP 500 from the endpoint: "
                           "internal error (more than --max-failed-share 50%)"), line
    assert f"r3con run --resume {folder}" in line
    assert "--max-failed-share 50%" in line  # a flag that exists (see the next test)
    assert len(calls_logged(folder)) == sent  # every call it made is in the run folder
    assert json.loads((folder / "error.json").read_text())["stage"] == "relevance"


def test_max_failed_share_is_a_flag_and_lets_a_degraded_run_finish(capsys, monkeypatch, corpus, tmp_path):
    runs = tmp_path / "runs"
    with FakeLLMServer(faults=FaultPlan.parse("500=1.0,max=1000,only=populate")) as server:
        code, out, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, runs, "--retries", "0",
                                                           "--max-failed-share", "1", "--json"))
    assert code == 0, err
    degraded = json.loads(out)["degraded"]
    assert {d["cause"] for d in degraded} == {"HTTP 500 from the endpoint: internal error"}
    assert sorted(d["doc"] for d in degraded) == sorted(str(d.number) for d in load_documents([corpus]))
    code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, "http://127.0.0.1:9/v1", runs,
                                                        "--max-failed-share", "2"))
    assert code == 2 and "--max-failed-share must be between 0 and 1" in one_line(err)


def test_populate_failing_everywhere_keeps_the_notes_and_names_the_cause(capsys, monkeypatch, corpus, tmp_path):
    runs = tmp_path / "runs"
    with FakeLLMServer(faults=FaultPlan.parse("500=1.0,max=1000,only=populate")) as server:
        code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, runs, "--retries", "0"))
    line = one_line(err)
    folder = run_folder(runs)
    assert code == 1 and "all 3 documents failed in populate: HTTP 500 from the endpoint: internal error" in line
    assert (folder / "notes" / "round-2.json").is_file() and (folder / "schema.json").is_file()


def test_a_failing_single_call_stage_reports_the_endpoints_own_error(capsys, monkeypatch, corpus, tmp_path):
    runs = tmp_path / "runs"
    with FakeLLMServer(faults=FaultPlan.parse("500=1.0,max=1000,only=schema")) as server:
        code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, runs, "--retries", "0"))
    line = one_line(err)
    folder = run_folder(runs)
    assert code == 1
    assert line.startswith("r3con: error in schema: ") and "answered HTTP 500: internal error" in line, line
    assert "OutputError" not in line and "schema proposal failed" not in line  # not rewrapped
    assert line.endswith(f"continue with r3con run --resume {folder} (the run folder keeps what was done)")
    assert (folder / "notes" / "round-2.json").is_file()


def test_unusable_replies_everywhere_name_the_models_problem(capsys, monkeypatch, corpus, tmp_path):
    runs = tmp_path / "runs"
    with FakeLLMServer(faults=FaultPlan.parse("empty=1.0,max=1000,only=populate")) as server:
        code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, runs))
    line = one_line(err)
    assert code == 1
    assert "all 3 documents failed in populate: the reply was empty after 3 attempts (populate stage); raise " \
           "the stage's max tokens or try another model (more than --max-failed-share 50%)" in line, line


def test_a_run_folder_that_cannot_be_made_says_pass_a_writable_out(capsys, monkeypatch, corpus, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with FakeLLMServer() as server:
        code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, blocker))
        assert server.calls() == []  # nothing was sent
    line = one_line(err)
    assert code == 2 and line.startswith(f"r3con: error: cannot create run folder {blocker}/") and \
        line.endswith("; pass a writable --out"), line


def test_a_refused_connection_says_connection_refused_and_where(capsys, monkeypatch, corpus, tmp_path):
    runs = tmp_path / "runs"
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    monkeypatch.setenv("R3CON_OUTAGE_S", "1")  # each call waits a server that refuses for this long (180 s by default)
    code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, url, runs, "--model", "m", "--context-window",
                                                        "8192", "--retries", "0"))
    line = one_line(err)
    assert code == 1
    assert f"all 3 documents failed in relevance: connection refused at {url} (more than --max-failed-share 50%); " \
           "start the server or pass the right --base-url" in line, line
    assert f"r3con run --resume {run_folder(runs)}" in line


def test_a_server_that_never_answers_says_timed_out_after_the_timeout(capsys, monkeypatch, corpus, tmp_path):
    runs = tmp_path / "runs"
    with FakeLLMServer(faults=FaultPlan.parse("hang=1.0,hang_s=3,max=1000")) as server:
        code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, runs, "--timeout", "1",
                                                            "--retries", "0"))
    line = one_line(err)
    assert code == 1
    assert re.search(r"all 3 documents failed in relevance: timed out( after 1 s)? at http://127\.0\.0\.1:\d+/v1 "
                     r"\(more than --max-failed-share 50%\); check that the server is up, or raise --timeout", line), line


def test_a_server_killed_mid_run_says_connection_refused(capsys, monkeypatch, corpus, tmp_path):
    runs, log = tmp_path / "runs", tmp_path / "server.jsonl"
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "r3con", "fake-llm", "--port", str(port), "--log", str(log),
                               "--faults", "delay=0.3"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().startswith("PORT=")

        def kill_after_first_answer() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not answered(runs):
                time.sleep(0.02)
            server.kill()

        killer = threading.Thread(target=kill_after_first_answer)
        killer.start()
        monkeypatch.setenv("R3CON_OUTAGE_S", "1")  # a server that stays down is waited for this long
        code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, f"http://127.0.0.1:{port}/v1", runs,
                                                            "--concurrency", "1", "--retries", "1"))
        killer.join()
    finally:
        server.kill()
        server.communicate()  # reaps it and closes its pipe
    line = one_line(err)
    assert code == 1
    assert "documents failed in relevance" in line and "connection refused at http://127.0.0.1" in line, line
    folder = run_folder(runs)
    assert any(c.get("error") is None for c in calls_logged(folder)), "the answered call was kept"


class _RefusesTheKey(BaseHTTPRequestHandler):
    """An endpoint that lists a model but refuses every chat request's API key (HTTP 401)."""

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._json(200, {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 8192}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._json(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the client hung up on the requests it no longer needed: expected here


def test_a_configuration_error_inside_a_fan_out_is_not_a_document_failure(capsys, monkeypatch, corpus, tmp_path):
    runs = tmp_path / "runs"
    httpd = _QuietServer(("127.0.0.1", 0), _RefusesTheKey)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, f"http://127.0.0.1:{httpd.server_address[1]}/v1",
                                                            runs, "--retries", "0"))
    finally:
        httpd.shutdown()
        httpd.server_close()
    line = one_line(err)
    assert code == 2, line  # ConfigError's exit code
    assert "refused the API key; set OPENAI_API_KEY or pass --api-key" in line
    assert "documents failed" not in line


def test_a_budget_stop_inside_a_fan_out_keeps_its_kind_and_what_was_spent(capsys, monkeypatch, corpus, tmp_path):
    # at these prices relevance and schema spend $0.024 and a populate call about $0.005. A call reserves what it
    # is expected to cost (a stage's first one, all of its reply cap: 400 tokens here), and settles what its reply
    # claims against what is left: the cap lets two populate calls through and stops before the third
    monkeypatch.setenv("R3CON_MAX_TOKENS_CAP", "400")
    runs = tmp_path / "runs"
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"r3con-scripted": {"input": 10.0, "output": 20.0}}))
    with FakeLLMServer() as server:
        code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, runs, "--prices", str(prices),
                                                            "--max-cost", "0.040", "--concurrency", "1"))
        called = len(server.calls())
    line = one_line(err)
    assert code == 1
    assert "--max-cost" in line and "documents failed" not in line, line
    folder = run_folder(runs)
    usage = json.loads((folder / "usage.json").read_text())
    assert json.loads((folder / "error.json").read_text())["stage"] == "populate"  # inside its fan-out
    assert any(c["stage"] == "populate" and c.get("error") is None for c in calls_logged(folder))  # the call under way came back
    assert 0 < usage["cost_usd"] <= 0.040 and usage["calls"] == called == answered(runs)  # each paid call is kept
    assert f"--resume {folder}" in line


# ---- inputs ---------------------------------------------------------------------------------------------

def encrypted_pdf(text: str, password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_minimal_pdf(text))))
    writer.encrypt(user_password=password, algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_an_aes_encrypted_pdf_is_refused_with_what_to_do_or_read_with_its_password(capsys, monkeypatch, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "salaries.pdf").write_bytes(encrypted_pdf("Dana Falk earns 5200 a month", "s3cret"))
    runs = tmp_path / "runs"
    with FakeLLMServer() as server:
        code, _, err = r3con(capsys, monkeypatch, *run_args(docs, server.base_url, runs))
        assert code == 2
        assert one_line(err) == (f"r3con: error: {docs / 'salaries.pdf'} is encrypted: pass --pdf-password "
                                 "(or set R3CON_PDF_PASSWORD)")
        code, _, err = r3con(capsys, monkeypatch, *run_args(docs, server.base_url, runs, "--pdf-password", "wrong"))
        assert code == 2 and "the password given does not open it; check --pdf-password" in one_line(err)
        assert not runs.exists() or not any(runs.iterdir()), "nothing was started"
        code, out, err = r3con(capsys, monkeypatch, *run_args(docs, server.base_url, runs, "--pdf-password", "s3cret",
                                                              "--json"))
        assert code == 0, err
        monkeypatch.setenv("R3CON_PDF_PASSWORD", "s3cret")
        code, _, err = r3con(capsys, monkeypatch, *run_args(docs, server.base_url, tmp_path / "runs2"))
        assert code == 0, err
    manifest = json.loads((Path(json.loads(out)["run_dir"]) / "manifest.json").read_text())
    assert [d["chars"] > 0 for d in manifest["documents"]] == [True]
    sent = " ".join(json.dumps(c) for c in calls_logged(Path(json.loads(out)["run_dir"])))
    assert "Dana Falk earns 5200" in sent  # the decrypted text reached the model


# ---- the machine ----------------------------------------------------------------------------------------

def test_a_full_disk_names_the_folder_and_the_run_resumes_without_redoing_calls(capsys, monkeypatch, corpus, tmp_path):
    runs = tmp_path / "runs"
    real_write = RunDir.write_text

    def full_at_records(self: RunDir, name: str, text: str) -> Path:
        if name == "records.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path / name))
        return real_write(self, name, text)

    with FakeLLMServer() as server:
        monkeypatch.setattr(RunDir, "write_text", full_at_records)
        code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, runs))
        line = one_line(err)
        folder = run_folder(runs)
        assert code == 1
        assert line.startswith(f"r3con: error in populate: no space left on the device while writing "
                               f"{folder / 'records.json'}; free some space"), line
        assert f"r3con run --resume {folder}" in line
        made = len(server.calls())
        assert json.loads((folder / "error.json").read_text())["kind"] == "disk full"
        monkeypatch.setattr(RunDir, "write_text", real_write)  # space freed
        code, out, err = r3con(capsys, monkeypatch, "run", "--resume", str(folder), "--quiet")
        assert code == 0, err
        assert out.strip() and len(server.calls()) - made <= 2  # only the answer's calls: the rest came from the cache


def test_a_bug_says_internal_error_and_keeps_the_traceback_in_the_run_folder(capsys, monkeypatch, corpus, tmp_path):
    runs = tmp_path / "runs"

    def broken(*args: object, **kwargs: object) -> str:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(pipeline, "schema_text", broken)
    with FakeLLMServer() as server:
        code, _, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, runs))
    line = one_line(err)
    folder = run_folder(runs)
    assert code == 1
    assert line == (f"r3con: internal error: ZeroDivisionError: division by zero (a bug in r3con: please report it, "
                    f"with {folder / 'error.json'}, which holds the traceback)")
    error = json.loads((folder / "error.json").read_text())
    assert error["kind"] == "internal error" and "ZeroDivisionError" in error["traceback"]
    assert (folder / "notes" / "round-2.json").is_file()  # what was done before the bug is kept


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_an_interrupted_resume_says_what_it_kept_and_how_to_continue(signum, code, corpus, tmp_path):
    runs = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}

    def interrupt(args: list[str], after: int, folder: Path | None = None) -> str:
        proc = subprocess.Popen([sys.executable, "-m", "r3con", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(calls_logged(folder)) if folder else answered(runs)) < after:
            time.sleep(0.02)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == code, err
        return one_line(err)

    with FakeLLMServer(faults=FaultPlan.parse("delay=0.2")) as server:
        interrupt(run_args(corpus, server.base_url, runs, "--concurrency", "1"), after=2)
        folder = run_folder(runs)
        before = len(calls_logged(folder))
        line = interrupt(["run", "--resume", str(folder), "--quiet", "--concurrency", "1"], after=before + 2,
                         folder=folder)
    assert "nothing was sent" not in line
    assert line.startswith(f"r3con: interrupted; the run folder {folder} keeps what was done ("), line
    assert line.endswith(f"continue with r3con run --resume {folder}")
    assert int(line.split("(")[1].split(" calls")[0]) >= before + 2, "the calls of both attempts are counted"


def _ignore_sigint() -> None:
    """What a shell without job control does to a background job (`r3con run ... &` in a script)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("signum, code, background", [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, False),
                                                      (signal.SIGTERM, 143, True)],
                         ids=["SIGTERM", "SIGINT", "SIGTERM-background-job"])
def test_a_terminated_run_says_how_to_continue_and_keeps_what_was_done(signum, code, background, corpus, tmp_path):
    runs = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_"))}
    with FakeLLMServer(faults=FaultPlan.parse("delay=0.2")) as server:
        proc = subprocess.Popen([sys.executable, "-m", "r3con", *run_args(corpus, server.base_url, runs,
                                                                          "--concurrency", "1")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                preexec_fn=_ignore_sigint if background else None)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and answered(runs) < 2:
            time.sleep(0.02)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == code, err
        line = one_line(err)
        folder = run_folder(runs)
        assert line.startswith(f"r3con: interrupted; the run folder {folder} keeps what was done ("), line
        assert line.endswith(f"continue with r3con run --resume {folder}")
        kept = [c for c in calls_logged(folder) if c.get("error") is None]
        assert len(kept) >= 2 and (folder / "manifest.json").is_file() and (folder / "usage.json").is_file()
        assert json.loads((folder / "error.json").read_text())["kind"] == "interrupted"
        made = len(server.calls())
        resumed = subprocess.run([sys.executable, "-m", "r3con", "run", "--resume", str(folder), "--quiet"],
                                 capture_output=True, text=True, env=env, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        total = len(server.calls()) - made
    fresh = json.loads((folder / "usage.json").read_text())
    assert fresh["cache_hits"] >= 2 and total < fresh["calls"] + fresh["cache_hits"]  # the finished calls were not paid again


def test_a_step_capped_agent_is_a_warning_line_even_with_json(capsys, monkeypatch, corpus, tmp_path):
    with FakeLLMServer() as server:
        code, out, err = r3con(capsys, monkeypatch, *run_args(corpus, server.base_url, tmp_path / "runs",
                                                              "--max-steps", "1", "--json"))
    assert code == 0 and json.loads(out)["capped"]
    assert ("warning: reason stopped at --max-steps 1 before the agent finished; the answer is its last word "
            "(raise --max-steps)") in err.replace("\n  ", " ").splitlines(), err  # wrapped at 80 columns


def test_a_resume_interrupted_before_its_first_call_still_names_its_folder_and_calls(tmp_path):
    from r3con.cli._ended import interrupted_line

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "calls.jsonl").write_text("{}\n" * 20)
    line = interrupted_line(None, resumed=folder)
    assert line == (f"r3con: interrupted; the run folder {folder} keeps what was done (20 calls in calls.jsonl): "
                    f"continue with r3con run --resume {folder}")
    assert interrupted_line(None) == "r3con: interrupted before the run began; nothing was sent"
