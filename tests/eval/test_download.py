import http.server
import io
import threading
import zipfile

import pytest

from r3con.errors import ConfigError
from r3con.eval.loong import DownloadError, download, download_loong


def test_offline_download_fails_with_one_actionable_line(tmp_path):
    with pytest.raises(DownloadError) as info:
        download_loong(tmp_path, jsonl_url="http://127.0.0.1:9/loong.jsonl", timeout_s=5)
    message = str(info.value)
    assert "\n" not in message and "cannot download http://127.0.0.1:9/loong.jsonl" in message
    assert "internet connection" in message
    assert list(tmp_path.iterdir()) == []  # nothing half-written is left


@pytest.fixture
def server():
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("doc/paper/1.md", "# A paper\ntext")
    files = {"/loong.jsonl": b'{"id": "x"}\n', "/doc.zip": archive.getvalue()}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = files.get(self.path)
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_download_lays_out_loong_for_data(tmp_path, server):
    folder = download_loong(tmp_path / "loong", jsonl_url=f"{server}/loong.jsonl", doc_url=f"{server}/doc.zip")
    assert (folder / "loong.jsonl").read_text() == '{"id": "x"}\n'
    assert (folder / "doc" / "paper" / "1.md").is_file() and not (folder / "doc.zip").exists()
    with pytest.raises(DownloadError, match="HTTP 404"):
        download_loong(tmp_path / "x", jsonl_url=f"{server}/missing.jsonl")


def test_other_benchmarks_say_where_their_data_comes_from(tmp_path):
    with pytest.raises(ConfigError, match="huggingface.co/datasets/Tongyi-Zhiwen/CorpusQA"):
        download("corpusqa", tmp_path)
    with pytest.raises(ConfigError, match="ships with the project data"):
        download("dracula", tmp_path)


def test_download_fetches_only_what_a_copy_lacks(tmp_path, server):
    copy = tmp_path / "loong"
    (copy / "doc" / "financial").mkdir(parents=True)
    (copy / "doc" / "paper").mkdir()
    (copy / "loong.jsonl").write_text('{"id": "mine"}\n')
    offline = "http://127.0.0.1:9/loong.jsonl"  # never asked: the file is here
    download_loong(copy, jsonl_url=offline, doc_url=f"{server}/doc.zip", timeout_s=5)
    assert (copy / "loong.jsonl").read_text() == '{"id": "mine"}\n' and (copy / "doc" / "paper" / "1.md").is_file()
    (copy / "doc" / "legal").mkdir()
    (copy / "doc" / "legal" / "legal.json").write_text("{}")
    download_loong(copy, jsonl_url=offline, doc_url="http://127.0.0.1:9/doc.zip", timeout_s=5)  # complete: no fetch


def test_a_copy_without_legal_documents_cannot_be_completed_offline(tmp_path):
    copy = tmp_path / "loong"
    (copy / "doc" / "paper").mkdir(parents=True)
    (copy / "loong.jsonl").write_text("{}\n")
    with pytest.raises(DownloadError) as info:
        download_loong(copy, doc_url="http://127.0.0.1:9/doc.zip", timeout_s=5)
    assert "\n" not in str(info.value) and "cannot download http://127.0.0.1:9/doc.zip" in str(info.value)
