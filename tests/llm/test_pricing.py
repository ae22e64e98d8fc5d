import json

import pytest

from r3con.errors import ConfigError
from r3con.llm.pricing import PriceTable
from r3con.llm.types import Usage


def test_models_the_price_database_knows_are_priced_as_their_provider_bills_them():
    table = PriceTable.load()
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=1_000_000)
    assert table.cost("gpt-4o-mini", usage) == pytest.approx(0.15 + 0.60)
    assert table.cost("gpt-4o-mini-2024-07-18", usage) == pytest.approx(0.75), "a dated snapshot"
    cached = Usage(prompt_tokens=1_000_000, cached_tokens=1_000_000)
    assert table.cost("gpt-4o-mini", cached) == pytest.approx(0.075), "cached input at its own price"
    openrouter = PriceTable.load(base_url="https://openrouter.ai/api/v1")
    assert openrouter.cost("openai/gpt-4o-mini", usage) == pytest.approx(0.75)
    assert "OpenRouter" in openrouter.quote("openai/gpt-4o-mini").source


def test_an_unknown_model_has_no_price_and_says_why_never_zero():
    table = PriceTable.load(base_url="https://api.example.com/v1")
    usage = Usage(calls=1, prompt_tokens=1000, completion_tokens=10)
    assert table.cost("my-fine-tune-7b", usage) is None
    priced = table.priced("my-fine-tune-7b", usage)
    assert priced.known_cost is None and priced.to_dict()["cost_usd"] is None
    assert "my-fine-tune-7b" in priced.to_dict()["cost_unknown"]
    assert priced.cost_text().startswith("price unknown") and "$0.0000" not in priced.cost_text()
    assert table.cost("deepseek-r1:8b", usage) is None, "a local distill is not priced as the provider's model"


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://192.168.1.20:8000/v1",
                                 "http://10.0.0.5/v1", "http://[::1]:1234/v1"])
def test_a_model_served_locally_is_free_and_says_so(url):
    table = PriceTable.load(base_url=url)
    usage = Usage(calls=2, prompt_tokens=1000, completion_tokens=10)
    priced = table.priced("qwen3:8b", usage)
    assert priced.known_cost == 0.0 and priced.local_calls == 2
    assert priced.cost_text() == "$0 (local server, free)"


def test_a_price_file_wins_over_the_database_and_over_local(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-4o-mini": {"input": 1.0, "output": 1.0}, "qwen3:8b": {"input": 2.0, "output": 0}}))
    usage = Usage(calls=1, prompt_tokens=1_000_000)
    assert PriceTable.load(path).cost("gpt-4o-mini", usage) == pytest.approx(1.0)
    assert PriceTable.load(path, base_url="http://127.0.0.1:8080/v1").cost("qwen3:8b", usage) == pytest.approx(2.0)


def test_unknown_prices_survive_a_round_trip_through_json_and_sums():
    unknown = PriceTable.load().priced("my-fine-tune-7b", Usage(calls=1, prompt_tokens=10))
    known = PriceTable.load().priced("gpt-4o-mini", Usage(calls=1, prompt_tokens=1_000_000))
    total = Usage.from_dict(json.loads(json.dumps((unknown + known).to_dict())))
    assert total.known_cost is None and total.unpriced == ("my-fine-tune-7b",)
    assert total.cost_usd == pytest.approx(0.15), "what the priced calls cost is kept"


def test_user_table_extends_and_prices_cached_tokens(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"my-model": {"input": 1.0, "output": 2.0, "cached_input": 0.1}}))
    table = PriceTable.load(path)
    cost = table.cost("my-model", Usage(prompt_tokens=1_000_000, cached_tokens=500_000, completion_tokens=0))
    assert cost == pytest.approx(0.5 + 0.05)
    assert table.find("gpt-4o") is not None, "the database under the file"


def test_bad_price_file_is_a_config_error(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read price table"):
        PriceTable.load(path)
