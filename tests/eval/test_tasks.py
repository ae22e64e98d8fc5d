from pathlib import Path

import pytest

from r3con.errors import ConfigError, InputError
from r3con.eval.benchmarks import load_benchmark
from r3con.eval.tasks import TaskFilter, default_data_dir, resolve_data_dir, safe_name


def test_filter_keeps_only_matching_categories_and_ids():
    f = TaskFilter(sets=(2, 3), domains=("paper",), task_ids=("x", "y"))
    assert f.keeps("x", {"set": 2, "domain": "paper"})
    assert not f.keeps("x", {"set": 1, "domain": "paper"})
    assert not f.keeps("z", {"set": 2, "domain": "paper"})
    assert TaskFilter().keeps("anything", {})


def test_a_filter_the_benchmark_lacks_is_a_config_error():
    with pytest.raises(ConfigError, match="--sets does not apply to dracula"):
        TaskFilter(sets=(2,)).check_applies("dracula", ())
    with pytest.raises(ConfigError, match="--limit"):
        TaskFilter(limit=0).check_applies("loong", ("sets",))


def test_default_data_dir_reads_the_given_environment():
    assert default_data_dir("loong", {"R3CON_DATA": "/data"}) == Path("/data/loong")
    assert default_data_dir("dracula", {}).parts[-3:] == ("shared", "data", "dracula")


def test_missing_data_is_an_input_error_that_names_the_fix(tmp_path):
    with pytest.raises(InputError, match="--data PATH or set R3CON_DATA"):
        resolve_data_dir("loong", tmp_path / "absent")


def test_safe_names_are_file_names_and_distinct():
    assert safe_name("financial_en_0001") == "financial_en_0001"
    a, b = safe_name("a/b"), safe_name("a:b")
    assert "/" not in a and a != b


def test_unknown_benchmark():
    with pytest.raises(ConfigError, match="unknown benchmark"):
        load_benchmark("nope", Path("."))
