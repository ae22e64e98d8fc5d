"""Endpoint mistakes a user makes, each refused at once with exit 2 and one line that says what to do."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ..conftest import free_port
from .test_failures import QUESTION, one_line, r3con


def run(capsys, monkeypatch, corpus, tmp_path, base_url: str, *more: str) -> tuple[int, str, float]:
    started = time.monotonic()
    code, _, err = r3con(capsys, monkeypatch, "run", QUESTION, str(corpus), "--base-url", base_url,
                         "--out", str(tmp_path / "runs"), "--quiet", *more)
    return code, one_line(err), time.monotonic() - started


class PlainHTTP:
    """A web server that is not an OpenAI-compatible API: 404 for every GET, 501 for every POST."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_error(404, "File not found")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def plain():
    server = PlainHTTP()
    yield server
    server.close()


def test_an_ftp_url_says_use_http(capsys, monkeypatch, corpus, tmp_path):
    code, line, _ = run(capsys, monkeypatch, corpus, tmp_path, "ftp://models.example/v1")
    assert code == 2 and "has the scheme ftp://; pass an http:// or https:// URL" in line, line


def test_a_zero_timeout_says_give_seconds(capsys, monkeypatch, corpus, tmp_path, fake_server):
    code, line, _ = run(capsys, monkeypatch, corpus, tmp_path, fake_server.base_url, "--timeout", "0")
    assert code == 2 and "--timeout 0 cannot work" in line, line


def test_a_base_url_without_v1_says_add_it(capsys, monkeypatch, corpus, tmp_path, fake_server):
    root = fake_server.base_url.removesuffix("/v1")
    code, line, _ = run(capsys, monkeypatch, corpus, tmp_path, root)
    assert code == 2 and f"--base-url {root} lacks /v1: pass {root}/v1" in line, line


def test_a_plain_web_server_is_refused_at_once_naming_its_status(capsys, monkeypatch, corpus, tmp_path, plain):
    code, line, took = run(capsys, monkeypatch, corpus, tmp_path, plain.url + "/v1")
    assert code == 2 and "answered HTTP 404" in line and "pass --model" in line, line
    code, line, took = run(capsys, monkeypatch, corpus, tmp_path, plain.url + "/v1", "--model", "m",
                           "--context-window", "8192")
    assert code == 2 and "/chat/completions answered HTTP 501: this is not an OpenAI-compatible API" in line, line
    assert took < 10, "not retried for seconds"


def test_a_refused_connection_names_the_url(capsys, monkeypatch, corpus, tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    code, line, _ = run(capsys, monkeypatch, corpus, tmp_path, url)
    assert code == 2 and f"no OpenAI-compatible server answers at {url} (connection refused); start it" in line, line
