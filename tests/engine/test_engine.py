"""Choosing the engine: the settings refuse what cannot work, with the fix in the message."""

import pytest

from r3con import Settings
from r3con.errors import ConfigError

from ..conftest import cli_in_process


def test_an_unknown_engine_or_ray_with_batch_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match="--engine='spark' is not valid.*local, ray"):
        Settings.resolve(env={}, base_url="http://127.0.0.1:9/v1", engine="spark")
    with pytest.raises(ConfigError, match="drop --engine ray or --batch"):
        Settings.resolve(env={}, base_url="http://127.0.0.1:9/v1", engine="ray", batch=True)


def test_the_engine_comes_from_the_environment_too():
    settings = Settings.resolve(env={"R3CON_ENGINE": "ray", "R3CON_RAY_ADDRESS": "10.0.0.5:6379"})
    assert (settings.engine, settings.ray_address) == ("ray", "10.0.0.5:6379")


def test_the_cli_says_the_engine_is_unknown_in_one_line(tmp_path):
    (tmp_path / "a.txt").write_text("Ann is 30.")
    proc = cli_in_process("run", "q?", str(tmp_path / "a.txt"), "--base-url", "http://127.0.0.1:9/v1",
                          "--engine", "spark")
    assert proc.returncode != 0 and "--engine='spark' is not valid" in proc.stderr
    assert "Traceback" not in proc.stderr


async def test_ray_not_installed_says_how_to_install_it(monkeypatch):
    import sys

    import r3con.engine
    from r3con.engine import open_engine

    monkeypatch.setitem(sys.modules, "ray", None)  # as where r3con[ray] is not installed
    # as if no test before had imported the Ray engine: `from . import _ray` would find the package's attribute
    monkeypatch.delitem(sys.modules, "r3con.engine._ray", raising=False)
    monkeypatch.delattr(r3con.engine, "_ray", raising=False)
    settings = Settings.resolve(env={}, base_url="http://127.0.0.1:9/v1", engine="ray")
    with pytest.raises(ConfigError, match=r"pip install 'r3con\[ray\]', or drop --engine ray"):
        async with open_engine(settings):
            pass
    async with open_engine(Settings.resolve(env={}, base_url="http://127.0.0.1:9/v1")) as remote:
        assert remote is None, "local: this process sends the calls"


def test_run_help_shows_the_ray_engine_in_an_example():
    proc = cli_in_process("run", "--help", env={"COLUMNS": "200"})
    assert proc.returncode == 0 and "--engine ray --pool pool.toml" in proc.stdout and "--ray-address" in proc.stdout
