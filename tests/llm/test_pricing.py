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


def _billed(reply_usage: dict, model: str) -> float | None:
    """What r3con prices a reply with this `usage` at: read as a reply is read, priced from the database."""
    from r3con.llm.transport.client import to_completion

    completion = to_completion({"choices": [{"message": {"content": "ok"}}], "usage": reply_usage}, model, 0.0)
    return PriceTable.load().cost(model, completion.usage)


def test_anthropic_cache_writes_are_billed_above_the_input_price_and_reads_below():
    # Anthropic's prompt caching docs (docs.anthropic.com/en/docs/build-with-claude/prompt-caching, "Pricing"):
    # Claude Sonnet 4: base input $3 / MTok, 5m cache writes $3.75 / MTok, cache hits $0.30 / MTok, output $15 / MTok.
    # A 10,200-token prompt whose first 10,000 tokens are written to the cache, then read from it, 500 tokens out,
    # as Anthropic-style usage passed through an OpenAI-compatible proxy (prompt_tokens counts all of them).
    first = {"prompt_tokens": 10_200, "completion_tokens": 500, "cache_creation_input_tokens": 10_000}
    again = {"prompt_tokens": 10_200, "completion_tokens": 500, "cache_read_input_tokens": 10_000}
    assert _billed(first, "claude-sonnet-4-20250514") == pytest.approx(10_000 * 3.75e-6 + 200 * 3e-6 + 500 * 15e-6)
    assert _billed(again, "claude-sonnet-4-20250514") == pytest.approx(10_000 * 0.30e-6 + 200 * 3e-6 + 500 * 15e-6)
    plain = {"prompt_tokens": 10_200, "completion_tokens": 500}
    assert _billed(again, "claude-sonnet-4-20250514") < _billed(plain, "claude-sonnet-4-20250514") \
        < _billed(first, "claude-sonnet-4-20250514"), "a cache write costs more than the plain prompt"


def test_openai_cached_reads_are_billed_at_the_cached_input_price():
    # OpenAI's prompt caching guide (platform.openai.com/docs/guides/prompt-caching) shows a reply with
    # "prompt_tokens": 2006, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 1920};
    # openai.com/api/pricing: gpt-4o-mini input $0.15 / 1M, cached input $0.075 / 1M, output $0.60 / 1M.
    usage = {"prompt_tokens": 2006, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 1920}}
    assert _billed(usage, "gpt-4o-mini") == pytest.approx(86 * 0.15e-6 + 1920 * 0.075e-6 + 300 * 0.60e-6)


def test_gemini_context_cache_reads_are_billed_at_the_caching_price():
    # ai.google.dev/gemini-api/docs/pricing, Gemini 2.5 Flash (text): input $0.30 / 1M, context caching $0.03 / 1M,
    # output $2.50 / 1M (storage by the hour is not a call's cost). Its OpenAI-compatible replies report cached
    # tokens under prompt_tokens_details.
    usage = {"prompt_tokens": 10_000, "completion_tokens": 100, "prompt_tokens_details": {"cached_tokens": 8000}}
    assert _billed(usage, "gemini-2.5-flash") == pytest.approx(2000 * 0.30e-6 + 8000 * 0.03e-6 + 100 * 2.50e-6)


def test_a_prices_file_may_price_cache_writes_and_the_cap_reserves_the_dearest_input(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"my-model": {"input": 1.0, "output": 2.0, "cached_input": 0.1, "cache_write": 1.25}}))
    table = PriceTable.load(path)
    usage = Usage(calls=1, prompt_tokens=1_000_000, cached_tokens=200_000, cache_write_tokens=300_000)
    assert table.cost("my-model", usage) == pytest.approx(0.5 * 1.0 + 0.2 * 0.1 + 0.3 * 1.25)
    assert table.find("my-model").dearest_input == 1.25
    over = Usage(calls=1, prompt_tokens=100, cached_tokens=80, cache_write_tokens=80)
    assert table.cost("my-model", over) == pytest.approx((80 * 0.1 + 20 * 1.25) / 1e6), "no token billed twice"
