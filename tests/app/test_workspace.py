"""The workspace over HTTP: files dropped on the page are kept in its own folder and read as any folder's,
every file accounted for (read as document N, or skipped and why), folders added by path persist."""

from __future__ import annotations

import json

import pytest

from r3con.app.workspace import Workspace

from .running import RunningApp, demo_state


@pytest.fixture
def app(tmp_path, fake_server):
    with RunningApp(demo_state(tmp_path, fake_server.base_url, [])) as running:
        yield running


def _put(app, name: str, data: bytes) -> int:
    return app.request("PUT", f"/api/files?name={name}", data, headers={"Content-Type": "application/octet-stream"})[0]


def test_dropped_files_are_read_and_accounted_for(app):
    assert json.loads(app.request("GET", "/api/tree")[1])["error"].startswith("add a folder")
    assert _put(app, "memo.txt", b"Ann Lee approved the order on 3 May.") == 200
    assert _put(app, "case%2Fletter.md", b"# Letter\n\nBob Stone wrote to Ann Lee.") == 200
    assert _put(app, "case%2Fscan.bin", bytes(range(256)) * 4) == 200
    tree = app.json("GET", "/api/tree")
    (root,) = tree["roots"]
    assert root["uploads"] and root["path"] == str(app.state.workspace.files)
    files = {f["path"]: f for f in tree["files"]}
    assert {p: f["status"] for p, f in files.items()} == {"memo.txt": "read", "case/letter.md": "read",
                                                         "case/scan.bin": "skipped"}
    assert isinstance(files["memo.txt"]["doc"], int) and "unsupported" in files["case/scan.bin"]["why"]
    assert (app.state.workspace.files / "case" / "letter.md").read_bytes().startswith(b"# Letter")


def test_a_folder_added_by_path_is_kept_and_a_bad_one_said_plainly(app, tmp_path):
    status, body = app.request("POST", "/api/folders", {"path": str(tmp_path / "nope")})
    assert status == 400 and "no such folder" in json.loads(body)["error"]
    status, body = app.request("POST", "/api/folders", {"path": str(app.state.workspace.runs)})
    assert status == 400 and "workspace" in json.loads(body)["error"]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Cara Holm, 29, moved to Bergen.")
    (docs / ".hidden.txt").write_text("not read")
    tree = app.json("POST", "/api/folders", {"path": str(docs)})
    statuses = {f["path"]: f["status"] for f in tree["files"]}
    assert statuses["a.txt"] == "read"
    assert Workspace(app.state.workspace.root).folders == [docs.resolve()]  # kept for the next start
