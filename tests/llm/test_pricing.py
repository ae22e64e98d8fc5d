import json

import pytest

from r3con.errors import ConfigError
from r3con.llm.pricing import PriceTable
from r3con.llm.types import Usage


def test_shipped_prices_match_model_ids_with_provider_prefixes():
    table = PriceTable.load()
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=1_000_000)
    assert table.cost("qwen/qwen3.5-35b-a3b", usage) == pytest.approx(1.14)
    assert table.cost("Qwen/Qwen3.5-9B", usage) == pytest.approx(0.25)
    assert table.cost("qwen3.5-4b", usage) == pytest.approx(0.12)
    assert table.cost("unknown-model", usage) == 0.0


def test_user_table_extends_and_prices_cached_tokens(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"my-model": {"input": 1.0, "output": 2.0, "cached_input": 0.1}}))
    table = PriceTable.load(path)
    cost = table.cost("my-model", Usage(prompt_tokens=1_000_000, cached_tokens=500_000, completion_tokens=0))
    assert cost == pytest.approx(0.5 + 0.05)
    assert table.find("qwen3.5-4b") is not None


def test_bad_price_file_is_a_config_error(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read price table"):
        PriceTable.load(path)
