"""`r3con run --pool FILE` and `--base-url` repeated as a user runs them: the per-endpoint usage, one-line errors."""

import json

from r3con.testing import FakeLLMServer

from ..conftest import cli_in_process


def test_a_pool_file_run_reports_each_endpoint(corpus, tmp_path):
    with FakeLLMServer(port=0) as first, FakeLLMServer(port=0) as second:
        pool = tmp_path / "pool.toml"
        pool.write_text(f'[[endpoint]]\nurl = "{first.base_url}"\nweight = 3\nconcurrency = 2\n\n'
                        f'[[endpoint]]\nurl = "{second.base_url}"\nkey_env = "SECOND_KEY"\n')
        proc = cli_in_process("run", "How old are the people named?", str(corpus), "--pool", str(pool), "--json",
                              "--quiet", "--out", str(tmp_path / "runs"), env={"SECOND_KEY": "k2"})
        assert proc.returncode == 0, proc.stderr
    usage = json.loads((tmp_path / "runs").glob("*/usage.json").__next__().read_text())
    by = {e["base_url"]: e for e in usage["by_endpoint"]}
    assert (by[first.base_url]["weight"], by[first.base_url]["concurrency"]) == (3.0, 2)
    assert by[second.base_url]["concurrency"] == 8, "--concurrency (default 8) per endpoint"
    assert sum(e["documents"] for e in by.values()) == 3 and sum(e["calls"] for e in by.values()) == usage["calls"]


def test_a_bad_pool_is_one_line_and_exit_2(corpus, tmp_path):
    pool = tmp_path / "pool.toml"
    pool.write_text('[[endpoint]]\nurl = "http://127.0.0.1:9/v1"\nmodle = "x"\n')
    proc = cli_in_process("run", "q", str(corpus), "--pool", str(pool))
    assert proc.returncode == 2 and "unknown field(s) modle" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli_in_process("run", "q", str(corpus), "--base-url", "http://127.0.0.1:9/v1", "--base-url", "ftp://x")
    assert proc.returncode == 2 and "ftp://" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_pool_run_resumes_on_other_endpoints(corpus, tmp_path):
    """A replica gone for good: the run continues on the others (where calls go is not what the run computes)."""
    with FakeLLMServer(port=0) as first, FakeLLMServer(port=0) as second, FakeLLMServer(port=0) as third:
        runs = tmp_path / "runs"
        proc = cli_in_process("run", "How old are the people named?", str(corpus), "--base-url", first.base_url,
                              "--base-url", second.base_url, "--quiet", "--out", str(runs))
        assert proc.returncode == 0, proc.stderr
        (folder,) = list(runs.iterdir())
        proc = cli_in_process("run", "--resume", str(folder), "--quiet")  # the same pool
        assert proc.returncode == 0, proc.stderr
        assert json.loads((folder / "manifest.json").read_text())["endpoint"]["pool"][1]["base_url"] == second.base_url
        proc = cli_in_process("run", "--resume", str(folder), "--base-url", second.base_url, "--base-url",
                              third.base_url, "--quiet")
        assert proc.returncode == 0, proc.stderr
    usage = json.loads((folder / "usage.json").read_text())
    assert usage["calls"] == 0 and usage["cache_hits"] > 0, "the cache knows a pool by its models: other replicas, no call again"
