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


def test_missing_endpoint_says_what_to_set():
    with pytest.raises(ConfigError, match="set OPENAI_BASE_URL"):
        Settings.resolve(env={}).require_endpoint()


def test_public_settings_hide_the_api_key():
    assert Settings.resolve(env={}, api_key="sk-secret").public()["api_key"] == "***"
