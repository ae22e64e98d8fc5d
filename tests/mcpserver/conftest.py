import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from ..conftest import cli_in_process

pytest.importorskip("mcp", reason="the MCP server's tests need pip install 'r3con[mcp]'")

DEMO = Path(__file__).resolve().parents[2] / "src" / "r3con" / "demo" / "corpus"
QUESTION = (DEMO.parent / "question.txt").read_text().strip()


@asynccontextmanager
async def r3con_mcp(*args: str, cwd: Path, env: dict[str, str] | None = None) -> AsyncIterator:
    """An MCP client of the SDK's that starts `r3con mcp ARGS` over stdio, as Claude Desktop would (with `env`
    over this environment less its R3CON_, OPENAI_ and OTEL_ variables); connected."""
    from mcp import Client, StdioServerParameters

    given = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R3CON_", "OPENAI_", "OTEL_"))}
    env.update({"R3CON_LOCAL_PORTS": "", **given})
    params = StdioServerParameters(command=sys.executable, args=["-m", "r3con", "mcp", *args], env=env, cwd=cwd)
    async with Client(params) as client:
        yield client


def structured(result) -> dict:
    """A tool's structured content (the JSON an agent reads), failing with the tool's error when it had one."""
    assert not result.is_error, result.content[0].text if result.content else result
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


@pytest.fixture
def finished_run(fake_server, tmp_path) -> Path:
    """A finished run of the demo question over the demo corpus, against the scripted server."""
    done = cli_in_process("run", QUESTION, str(DEMO), "--base-url", fake_server.base_url, "--out",
                          str(tmp_path / "runs"), "--json", "--quiet")
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout)["run_dir"]).resolve()
