import pytest

from r3con.errors import ConfigError
from r3con.llm.transport.tokenize import EndpointCounter, make_counter
from r3con.tokens import CJK_CHAR, EstimateCounter, FileCounter, count_cjk, estimate_tokens


def test_estimate_counts_cjk_characters_as_tokens_and_adds_a_margin():
    assert estimate_tokens("") == 0
    latin = estimate_tokens("a" * 400)
    assert 100 < latin <= 112
    cjk = estimate_tokens("中文文本" * 100)
    assert cjk >= 440, "each CJK character is about one token, plus 10%"


@pytest.mark.parametrize("text", [
    "", "plain ascii", "café – “quoted”", "营业收入增长了 12.5%，净利润为 3,456 万元。", "ｶﾀｶﾅ ひらがな 한국어 ＡＢＣ",
    "\u303f\u3040\u30ff\u3100\u33ff\u3400\u4dbf\u4dc0\ud7af\ud7b0\uffef\ufff0",  # each range's edges
    "astral 𝔘𠀀 and a lone surrogate \ud800 中",
])
def test_count_cjk_counts_what_the_cjk_pattern_matches(text):
    assert count_cjk(text) == len(CJK_CHAR.findall(text))


async def test_endpoint_counter_uses_the_servers_tokenize(fake_server):
    counter = EndpointCounter(fake_server.base_url, "r3con-scripted")
    try:
        counts = await counter.count(["word " * 100, "x"])
    finally:
        await counter.aclose()
    assert counts == [126, 1]  # the scripted server's own count: 1 + characters / 4
    assert counter.source.endswith("/tokenize")


async def test_endpoint_without_tokenize_falls_back_to_the_estimate(fake_server):
    base = fake_server.base_url.replace("/v1", "/elsewhere/v1")
    counter = EndpointCounter(base, "r3con-scripted")
    try:
        counts = await counter.count(["word " * 100])
    finally:
        await counter.aclose()
    assert counts == [estimate_tokens("word " * 100)]
    assert "no /tokenize" in counter.source


async def test_a_busy_or_loading_endpoint_is_asked_again_before_its_tokenize_is_given_up():
    from aiohttp import web

    from tests.llm.test_hostile import stub

    seen = []

    async def handler(request: web.Request) -> web.Response:  # llama.cpp while it loads, then its own reply
        seen.append(request.path)
        if len(seen) == 1:
            return web.json_response({"error": {"message": "Loading model", "code": 503}}, status=503)
        return web.json_response({"tokens": [1, 2, 3]})

    async with stub(handler) as url:
        counter = EndpointCounter(url, "m")
        try:
            counts = await counter.count(["three tokens here"])
        finally:
            await counter.aclose()
    assert counts == [3] and counter.source.endswith("/tokenize") and seen == ["/tokenize", "/tokenize"]


async def test_make_counter_prefers_a_file_then_the_endpoint_then_the_estimate(tmp_path):
    assert isinstance(make_counter(), EstimateCounter)
    assert isinstance(make_counter(base_url="http://127.0.0.1:1/v1", model="m"), EndpointCounter)
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="pip install tokenizers"):
            make_counter(tokenizer_file=tmp_path / "tokenizer.json")
    else:
        with pytest.raises(ConfigError, match="cannot read tokenizer file"):
            FileCounter(tmp_path / "missing.json")
