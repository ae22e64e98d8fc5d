import dataclasses
import re
from pathlib import Path

import pytest

from r3con.config import Settings
from r3con.errors import ConfigError


def test_flags_beat_r3con_env_which_beats_openai_env():
    env = {"OPENAI_BASE_URL": "http://openai/v1", "OPENAI_API_KEY": "sk-o", "R3CON_BASE_URL": "http://r3con/v1"}
    assert Settings.resolve(env=env).base_url == "http://r3con/v1"
    assert Settings.resolve(env=env).api_key == "sk-o"
    assert Settings.resolve(env=env, base_url="http://flag/v1").base_url == "http://flag/v1"
    assert Settings.resolve(env={"OPENAI_BASE_URL": "http://openai/v1"}).base_url == "http://openai/v1"


def test_typed_env_values_and_stage_models():
    env = {"R3CON_ROUNDS": "3", "R3CON_STRUCTURING": "false", "R3CON_OUT_DIR": "/tmp/x", "R3CON_MODEL": "big",
           "R3CON_MODEL_RELEVANCE": "small"}
    s = Settings.resolve(env=env, stage_models={"reason": "huge"})
    assert s.rounds == 3 and s.structuring is False and s.out_dir == Path("/tmp/x")
    assert s.model_for("relevance") == "small" and s.model_for("reason") == "huge" and s.model_for("schema") == "big"


@pytest.mark.parametrize("env, message", [
    ({"R3CON_ROUNDS": "two"}, "R3CON_ROUNDS='two' is not valid"),
    ({"R3CON_REASONING": "magic"}, "expected one of code, direct"),
    ({"R3CON_ROUNDS": "-1"}, "R3CON_ROUNDS=-1 must be 0 or more"),  # the variable, not a flag never passed
])
def test_bad_values_are_config_errors_naming_the_source(env, message):
    with pytest.raises(ConfigError, match=message):
        Settings.resolve(env=env)


@pytest.mark.parametrize("variable", ["R3CON_MAX_RECORDS", "R3CON_MAX_RECORD_FIELDS", "R3CON_MAX_VALUE_CHARS"])
@pytest.mark.parametrize("raw, message", [("0", "=0 cannot work: give a whole number of at least 1"),
                                          ("-3", "=-3 cannot work: give a whole number of at least 1"),
                                          ("nan", "='nan' is not valid"), ("1.5", "='1.5' is not valid")])
def test_a_record_limit_that_cannot_work_is_one_line_naming_the_variable(variable, raw, message):
    with pytest.raises(ConfigError, match=re.escape(variable + message)) as caught:
        Settings.resolve(env={variable: raw})
    assert "\n" not in str(caught.value)


def test_record_limits_come_from_the_environment_and_a_nan_given_in_code_is_refused():
    from r3con.stages.populate import RecordLimits

    settings = Settings.resolve(env={"R3CON_MAX_RECORDS": "50", "R3CON_MAX_RECORD_FIELDS": "12",
                                     "R3CON_MAX_VALUE_CHARS": "30000"})
    assert RecordLimits.of(settings) == RecordLimits(records=50, fields=12, value_chars=30_000)
    assert RecordLimits.of() == RecordLimits(records=2_000, fields=256, value_chars=20_000)
    with pytest.raises(ConfigError, match="--max-value-chars nan is not a number"):
        Settings(max_value_chars=float("nan")).check()  # type: ignore[arg-type]


def test_missing_endpoint_says_what_to_set():
    with pytest.raises(ConfigError, match="set OPENAI_BASE_URL"):
        Settings.resolve(env={}).require_endpoint()


def test_public_settings_hide_the_api_key():
    assert Settings.resolve(env={}, api_key="sk-secret").public()["api_key"] == "***"


def test_every_setting_declares_its_role():
    from r3con.config import ROLES

    missing = [f.name for f in dataclasses.fields(Settings) if f.metadata.get("role") not in ROLES]
    assert missing == [], f"declare a role ({', '.join(ROLES)}) for: {', '.join(missing)}"


def test_the_reuse_key_and_the_resume_check_follow_the_roles():
    from r3con.pipeline.reuse import question_key
    from r3con.runs._resume import OPERATIONAL

    roles = Settings.roles()
    base = Settings.resolve(env={})
    for name, role in roles.items():
        value = getattr(base, name)
        other = {bool: lambda v: not v, int: lambda v: v + 1, float: lambda v: v * 2}.get(type(value))
        if other is None:
            continue
        changed = question_key("q", dataclasses.replace(base, **{name: other(value)})) != question_key("q", base)
        assert changed == (role in ("request", "question")), name
        assert (name in OPERATIONAL) == (role == "operational"), name
    assert {"reuse", "new_schema", "concurrency", "max_failed_share"}.isdisjoint(base.question_settings())


def test_a_library_run_finds_the_local_server_as_r3con_run_does(monkeypatch, tmp_path):
    import asyncio
    import json

    import r3con
    from r3con.testing import OllamaServer

    from .conftest import cli_in_process, free_port

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old and lives in Oslo.")
    with OllamaServer(models=("llama3.2:latest", "qwen3:8b"), running={"llama3.2:latest": 8192}) as server:
        ports = f"{free_port()}=vLLM,{server.port}=Ollama"
        monkeypatch.setenv("R3CON_LOCAL_PORTS", ports)
        settings = Settings.resolve(out_dir=tmp_path / "library", rounds=1)
        assert settings.base_url is None, "resolving reads configuration; the run looks for a server"
        result = asyncio.run(r3con.run("How old is Ann Lee?", r3con.load_corpus([str(docs)]).documents, settings))
        proc = cli_in_process("run", "How old is Ann Lee?", str(docs), "--out", str(tmp_path / "runs"), "--quiet",
                              env={"R3CON_LOCAL_PORTS": ports})
    assert proc.returncode == 0, proc.stderr
    (manifest,) = (tmp_path / "runs").glob("*/manifest.json")
    chosen = json.loads(manifest.read_text())["settings"]
    used = json.loads((result.run_dir / "manifest.json").read_text())["settings"]
    assert (used["base_url"], used["model"]) == (chosen["base_url"], chosen["model"])
    assert (used["base_url"], used["model"]) == (server.base_url, "llama3.2:latest")


def test_a_library_run_with_two_local_servers_asks_which_one(monkeypatch, tmp_path):
    import asyncio

    import r3con
    from r3con.testing import LMStudioServer, OllamaServer

    with OllamaServer() as a, LMStudioServer() as b:
        monkeypatch.setenv("R3CON_LOCAL_PORTS", f"{a.port},{b.port}")
        docs = r3con.documents_from_texts([("a", "Ann Lee is 34.")])
        with pytest.raises(ConfigError, match="2 local servers answer"):
            asyncio.run(r3con.run("How old is Ann Lee?", docs, Settings.resolve(out_dir=tmp_path)))


def test_the_openai_sdks_names_for_organization_and_project_are_read_and_other_tools_names_are_warned_of():
    from r3con.config import unknown_variables

    settings = Settings.resolve(env={"OPENAI_ORG_ID": "org-7", "OPENAI_PROJECT_ID": "proj-9"}, base_url="http://h/v1")
    assert (settings.organization, settings.project) == ("org-7", "proj-9")
    # OPENAI_ORGANIZATION / OPENAI_PROJECT (as other tools name them) are not read: a warning names the real ones
    lookalikes = {"OPENAI_ORGANIZATION": "org-1", "OPENAI_PROJECT": "proj-1"}
    settings = Settings.resolve(env=lookalikes, base_url="http://h/v1")
    assert (settings.organization, settings.project) == (None, None)
    warned = unknown_variables(lookalikes)
    assert any("OPENAI_ORGANIZATION" in w and "set OPENAI_ORG_ID" in w for w in warned), warned
    assert any("OPENAI_PROJECT " in w and "set OPENAI_PROJECT_ID" in w for w in warned), warned
    assert unknown_variables({**lookalikes, "OPENAI_ORG_ID": "o", "OPENAI_PROJECT_ID": "p"}) == []
