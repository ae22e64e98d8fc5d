"""What an environment and a server can do, through the CLI: keys with white space, misspelt variables,
invalid values, a dead proxy, a question given twice, too many rounds, a long Retry-After."""

from __future__ import annotations

import json
import time

import pytest

from r3con.testing import FakeLLMServer, FaultPlan

from ..conftest import cli_in_process, free_port
from ._hostile import within

QUESTION = "How old are the people named?"
LIMIT_S = 60


def _run(corpus, tmp_path, server, *extra, env=None):
    rounds = () if "R3CON_ROUNDS" in (env or {}) or "--rounds" in extra else ("--rounds", "1")
    with within(LIMIT_S):
        return cli_in_process("run", QUESTION, str(corpus), "--base-url", server.base_url, "--out",
                              str(tmp_path / "runs"), "--reasoning", "direct", *rounds, "-q", *extra, env=env)


def _errors(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("r3con: error")]


# (case, env, flags): a key or header value the shell gave with white space around it: trimmed, the run works
TRIMMED = [
    ("key from $(cat key.txt)", {"OPENAI_API_KEY": "sk-test\n"}, ()),
    ("key with CRLF", {"R3CON_API_KEY": "sk-test\r\n"}, ()),
    ("key with spaces around", {}, ("--api-key", "  sk-test  ")),
    ("organization with a newline", {"OPENAI_ORG_ID": "org-1\n"}, ()),
    ("project with a tab after it", {"OPENAI_PROJECT_ID": "proj_1\t"}, ()),
]


@pytest.mark.parametrize("case, env, flags", TRIMMED, ids=[c[0] for c in TRIMMED])
def test_white_space_around_a_key_is_trimmed_and_the_key_sent_as_it_is(case, env, flags, corpus, tmp_path):
    with FakeLLMServer(port=0) as server:
        proc = _run(corpus, tmp_path, server, *flags, env=env)
    assert proc.returncode == 0, proc.stderr  # a header value with a control character cannot be sent at all
    assert "internal error" not in proc.stderr and "warning" not in proc.stderr


# (case, env, flags, the setting the message names)
REFUSED = [
    ("tab inside a key", {"OPENAI_API_KEY": "sk-a\tb"}, (), "OPENAI_API_KEY"),
    ("newline inside a key", {"R3CON_API_KEY": "sk-a\nb"}, (), "R3CON_API_KEY"),
    ("non-ASCII key flag", {}, ("--api-key", "sk-é"), "--api-key"),
    ("escape character in a key", {"OPENAI_API_KEY": "sk-\x1b[0m"}, (), "OPENAI_API_KEY"),
    ("newline inside an organization", {"OPENAI_ORG_ID": "org\nX-Evil: 1"}, (), "OPENAI_ORG_ID"),
    ("R3CON_ROUNDS below 0", {"R3CON_ROUNDS": "-1"}, (), "R3CON_ROUNDS=-1"),
    ("R3CON_CONCURRENCY of 0", {"R3CON_CONCURRENCY": "0"}, (), "R3CON_CONCURRENCY=0"),
    ("R3CON_MAX_COST_USD below 0", {"R3CON_MAX_COST_USD": "-5"}, (), "R3CON_MAX_COST_USD=-5"),
    ("R3CON_REQUEST_TIMEOUT_S of 0", {"R3CON_REQUEST_TIMEOUT_S": "0"}, (), "R3CON_REQUEST_TIMEOUT_S=0"),
    ("R3CON_MAX_FAILED_SHARE of 2", {"R3CON_MAX_FAILED_SHARE": "2"}, (), "R3CON_MAX_FAILED_SHARE=2"),
    ("R3CON_ROUNDS not a number", {"R3CON_ROUNDS": "two"}, (), "R3CON_ROUNDS='two'"),
    ("R3CON_MAX_RECORD_FIELDS of 0", {"R3CON_MAX_RECORD_FIELDS": "0"}, (), "R3CON_MAX_RECORD_FIELDS=0 cannot work"),
    ("--rounds below 0 names the flag", {}, ("--rounds", "-1"), "--rounds must be"),
    ("--max-cost of 0 names the flag", {}, ("--max-cost", "0"), "--max-cost must be"),
]


@pytest.mark.parametrize("case, env, flags, names", REFUSED, ids=[c[0] for c in REFUSED])
def test_an_impossible_value_is_refused_naming_where_it_came_from(case, env, flags, names, corpus, tmp_path,
                                                                  fake_server):
    proc = _run(corpus, tmp_path, fake_server, *flags, env=env)
    assert proc.returncode == 2, proc.stderr
    (line,) = _errors(proc)
    assert names in line, line
    assert "internal error" not in proc.stderr
    if not flags:
        assert "--" not in line.split(names, 1)[0], "no flag the user never passed"
    assert not (tmp_path / "runs").exists()


# (case, variable, the warning's hint)
MISSPELT = [
    ("max cost without its unit", "R3CON_MAX_COST", "did you mean R3CON_MAX_COST_USD?"),
    ("round for rounds", "R3CON_ROUND", "did you mean R3CON_ROUNDS?"),
    ("base url misspelt", "R3CON_BASEURL", "did you mean R3CON_BASE_URL?"),
    ("stage model misspelt", "R3CON_MODEL_RELEVANC", "did you mean R3CON_MODEL_RELEVANCE?"),
    ("nothing like any setting", "R3CON_ZZZ_QQQ", "see docs/configuration.md for the names"),
]


@pytest.mark.parametrize("case, variable, hint", MISSPELT, ids=[c[0] for c in MISSPELT])
@pytest.mark.parametrize("command", ["run", "estimate"])
def test_an_unknown_variable_is_warned_with_the_closest_name(case, variable, hint, command, corpus, tmp_path,
                                                           fake_server):
    env = {variable: "0.0000001"}
    if command == "run":
        proc = _run(corpus, tmp_path, fake_server, env=env)
    else:
        proc = cli_in_process("estimate", QUESTION, str(corpus), env=env)
    assert proc.returncode == 0, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("r3con: warning:")]
    assert line == f"r3con: warning: {variable} is not a setting r3con reads ({hint}); it is ignored"


def test_known_variables_draw_no_warning(corpus, tmp_path, fake_server):
    env = {"R3CON_MAX_COST_USD": "5", "R3CON_MODEL_RELEVANCE": "r3con-scripted", "R3CON_PDF_PASSWORD": "x",
           "R3CON_DEBUG": "", "R3CON_RETRY_BASE_S": "0.01"}
    proc = cli_in_process("estimate", QUESTION, str(corpus), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr


def test_a_dead_proxy_is_named_as_the_proxy(corpus, tmp_path, fake_server):
    dead = f"http://user:secret@127.0.0.1:{free_port()}"
    proc = _run(corpus, tmp_path, fake_server, env={"HTTP_PROXY": dead, "NO_PROXY": ""})
    assert proc.returncode == 2, proc.stderr
    (line,) = _errors(proc)
    assert "the proxy http://127.0.0.1:" in line and "(from HTTP_PROXY)" in line and "NO_PROXY=127.0.0.1" in line
    assert "secret" not in proc.stderr, "the proxy's password is not printed"
    assert "no OpenAI-compatible server answers" not in line


def test_no_proxy_reaches_the_endpoint_around_a_dead_proxy(corpus, tmp_path, fake_server):
    dead = f"http://127.0.0.1:{free_port()}"
    proc = _run(corpus, tmp_path, fake_server, env={"HTTP_PROXY": dead, "NO_PROXY": "127.0.0.1"})
    assert proc.returncode == 0, proc.stderr


def test_a_question_given_twice_is_refused(corpus, tmp_path, fake_server):
    question = tmp_path / "q.txt"
    question.write_text(QUESTION)
    proc = _run(corpus, tmp_path, fake_server, "--question-file", str(question))  # QUESTION is the argument too
    assert proc.returncode == 2, proc.stderr
    (line,) = _errors(proc)
    assert "the question is given twice" in line and "give it one way" in line


def test_with_a_question_file_the_first_argument_may_be_a_folder(corpus, tmp_path, fake_server):
    question = tmp_path / "q.txt"
    question.write_text(QUESTION)
    with within(LIMIT_S):
        proc = cli_in_process("run", str(corpus), "--question-file", str(question), "--base-url", fake_server.base_url,
                              "--out", str(tmp_path / "runs"), "--reasoning", "direct", "--rounds", "1", "--json", "-q")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["documents"] == 3


@pytest.mark.parametrize("rounds, warned", [(1000, True), (5, True), (4, False), (2, False)])
def test_more_rounds_than_the_method_needs_are_warned(rounds, warned, corpus):
    proc = cli_in_process("estimate", QUESTION, str(corpus), "--rounds", str(rounds))
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("r3con: warning:")]
    if warned:
        (line,) = lines
        assert f"--rounds {rounds} is more than the method needs" in line and f"running {rounds} as asked" in line
    else:
        assert lines == []


def test_a_retry_after_longer_than_the_call_limit_ends_the_run_at_once(corpus, tmp_path):
    plan = FaultPlan.parse("429=1.0,retry_after=3600")
    with FakeLLMServer(port=0, faults=plan) as server:
        started = time.monotonic()
        proc = _run(corpus, tmp_path, server, "--no-cache")
        took = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    assert took < 30, f"sat {took:.0f} s in a wait the endpoint asked for"
    (line,) = _errors(proc)
    assert "asking to wait 3600 s (Retry-After)" in line and "--resume" in line
    calls = (next((tmp_path / "runs").iterdir()) / "calls.jsonl").read_text()
    assert "longer than the one-call limit of 300 s (R3CON_MAX_CALL_S)" in calls


def test_waiting_on_a_rate_limit_shows_on_the_progress_line(corpus, tmp_path):
    plan = FaultPlan.parse("429=1.0,retry_after=1,max=2")
    with FakeLLMServer(port=0, faults=plan) as server, within(LIMIT_S):
        proc = cli_in_process("run", QUESTION, str(corpus), "--base-url", server.base_url, "--out",
                              str(tmp_path / "runs"), "--reasoning", "direct", "--rounds", "1", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    waits = [line for line in proc.stderr.splitlines() if "waiting" in line]
    assert waits, proc.stderr
    assert server.base_url in waits[0] and "rate limit (HTTP 429)" in waits[0] and " until " in waits[0]
    assert "Ctrl-C stops, --resume continues" in waits[0]
