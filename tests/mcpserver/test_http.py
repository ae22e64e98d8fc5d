"""`r3con mcp --http`: loopback, a token printed at start and required on every request, Host and Origin checked."""

import os
import re
import subprocess
import sys
import time

import pytest


@pytest.fixture
def http_server(tmp_path):
    """`r3con mcp --http --port 0` in a subprocess; its URL and token, as it printed them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_", "OTEL_"))}
    server = subprocess.Popen([sys.executable, "-m", "r3con", "mcp", "--http", "--port", "0", "--out",
                               str(tmp_path / "runs")], stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        lines = [server.stderr.readline(), server.stderr.readline()]  # type: ignore[union-attr]
        url = re.search(r"serving MCP at (\S+)", lines[0]).group(1)  # type: ignore[union-attr]
        token = re.search(r"token (\S+) ", lines[1]).group(1)  # type: ignore[union-attr]
        yield url, token
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stderr.close()  # type: ignore[union-attr]


async def test_only_a_request_with_the_printed_token_and_its_own_host_reaches_the_tools(http_server):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    url, token = http_server
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    deadline = time.monotonic() + 30
    async with httpx2.AsyncClient() as http:
        while True:  # until uvicorn serves (the socket listens from the start)
            refused = await http.post(url, json=body, headers=accept)
            if refused.status_code != 503 or time.monotonic() > deadline:
                break
        assert refused.status_code == 401 and "Bearer" in refused.text
        wrong = await http.post(url, json=body, headers={**accept, "Authorization": "Bearer not-the-token"})
        assert wrong.status_code == 401
        rebound = await http.post(url, json=body, headers={**accept, "Authorization": f"Bearer {token}",
                                                          "Host": "attacker.example"})
        assert rebound.status_code in (400, 403, 421), rebound.status_code
        foreign = await http.post(url, json=body, headers={**accept, "Authorization": f"Bearer {token}",
                                                           "Origin": "http://attacker.example"})
        assert foreign.status_code in (400, 403), foreign.status_code
    # a client the caller passes in is the caller's to close
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        runs = await client.call_tool("runs", {})
    assert names == {"ask", "estimate", "runs", "records", "passage"}
    assert not runs.is_error and runs.structured_content == {"runs": []}
