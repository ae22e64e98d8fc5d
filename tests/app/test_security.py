"""Who may talk to the app (plain HTTP, no browser): the token, the Host, the Origin, and paths that leave
the workspace, each refused with 401 or 403 and never a redirect."""

from __future__ import annotations

import json

import pytest

from r3con.demo import corpus_dir

from .running import TOKEN, RunningApp, demo_state


@pytest.fixture
def app(tmp_path, fake_server):
    with RunningApp(demo_state(tmp_path, fake_server.base_url, [str(corpus_dir())])) as running:
        yield running


def test_the_token_in_the_url_opens_the_page_and_sets_the_cookie(app):
    status, body = app.request("GET", f"/?token={TOKEN}", token=False)
    assert status == 200 and 'data-testid="add-folder"' in body
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", app.port)
    conn.request("GET", f"/?token={TOKEN}", headers={"Host": f"127.0.0.1:{app.port}"})
    response = conn.getresponse()
    cookie = response.getheader("set-cookie") or ""
    response.read()
    conn.close()
    assert f"r3con_token={TOKEN}" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert response.getheader("x-frame-options") == "SAMEORIGIN"  # no other site frames it
    status, _ = app.request("GET", "/api/about", token=False, headers={"Cookie": f"r3con_token={TOKEN}"})
    assert status == 200


@pytest.mark.parametrize("path", ["/", "/api/about", "/api/tree", "/static/app.js", "/api/runs"])
def test_without_the_token_every_path_is_refused(app, path):
    status, body = app.request("GET", path, token=False)
    assert status == 401 and "token" in body
    status, _ = app.request("GET", path + "?token=wrong", token=False)
    assert status == 401


def test_a_wrong_token_cookie_is_refused(app):
    status, _ = app.request("GET", "/api/about", token=False, headers={"Cookie": "r3con_token=guess"})
    assert status == 401


@pytest.mark.parametrize("host", ["evil.example:{port}", "127.0.0.1:1", "attacker.localhost:{port}", ""])
def test_a_foreign_host_is_refused_even_with_the_token(app, host):
    status, body = app.request("GET", f"/?token={TOKEN}", headers={"Host": host.format(port=app.port)})
    assert status == 403 and "Host" in body


def test_localhost_names_of_the_same_port_pass(app):
    for host in (f"localhost:{app.port}", f"127.0.0.1:{app.port}"):
        status, _ = app.request("GET", "/api/about", headers={"Host": host})
        assert status == 200


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://localhost:1"])
def test_a_foreign_origin_is_refused_even_with_the_token(app, origin):
    status, body = app.request("POST", "/api/folders", {"path": "/"}, headers={"Origin": origin})
    assert status == 403 and "Origin" in body
    assert app.state.workspace.folders == [corpus_dir().resolve()]  # nothing was added


def test_the_same_origin_passes(app):
    status, _ = app.request("GET", "/api/about", headers={"Origin": f"http://127.0.0.1:{app.port}"})
    assert status == 200


def test_paths_outside_the_workspace_are_refused(app, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("not yours")
    for path in (str(outside), "/etc/passwd", str(corpus_dir() / ".." / ".." / "__init__.py")):
        status, body = app.request("GET", f"/api/file?path={path}")
        assert status == 403 and "not yours" not in body and "outside the workspace" in body
    status, body = app.request("GET", f"/api/file?path={corpus_dir() / '01_supplier_register.md'}")
    assert status == 200 and "Supplier Register" in json.loads(body)["text"]


def test_a_link_out_of_an_added_folder_is_not_followed(app, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("not yours")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("a document")
    (docs / "link.txt").symlink_to(outside)
    app.json("POST", "/api/folders", {"path": str(docs)})
    status, body = app.request("GET", f"/api/file?path={docs / 'link.txt'}")
    assert status == 403 and "not yours" not in body


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/passwd", "a/../../b.txt", ".hidden", ""])
def test_uploads_stay_in_the_workspace(app, name):
    status, _ = app.request("PUT", f"/api/files?name={name}", b"text", headers={"Content-Type": "application/octet-stream"})
    assert status in (400, 403)
    root = app.state.workspace.root
    assert not (root.parent / "escape.txt").exists() and not (root.parent / "b.txt").exists()


def test_an_upload_over_the_limit_is_refused_and_not_kept(app):
    app.state.workspace.limits = type(app.state.workspace.limits)(file_bytes=1000, files=3)
    status, body = app.request("PUT", "/api/files?name=big.txt", b"x" * 5000,
                               headers={"Content-Type": "application/octet-stream"})
    assert status == 413 and "over" in body
    assert not any(app.state.workspace.files.rglob("big.txt*"))
    for i in range(3):
        status, _ = app.request("PUT", f"/api/files?name=f{i}.txt", b"small", headers={"Content-Type": "application/octet-stream"})
        assert status == 200
    status, body = app.request("PUT", "/api/files?name=f9.txt", b"small", headers={"Content-Type": "application/octet-stream"})
    assert status == 413 and "holds 3" in body


def test_runs_are_named_only_inside_the_workspace(app):
    for name in ("..", "..%2F..%2Fetc", "%2Fetc"):
        status, _ = app.request("GET", f"/runs/{name}/view")
        assert status in (400, 403, 404)
    status, _ = app.request("POST", "/api/runs/..%2F..%2Ftmp/resume", {})
    assert status in (400, 403, 404)
