"""Each common server's "too long for the window" reply is recognised; other 400s are not."""

import pytest

from r3con.errors import ContextTooLong
from r3con.llm.layers.overflow import Overflows, is_overflow, stated_limit
from r3con.llm.layers.shaped import Shaped
from r3con.llm.types import ChatRequest, Message
from r3con.llm.window import FLOOR_WINDOW, Window

from ..fakes import ScriptedLLM


@pytest.mark.parametrize("text", [
    # OpenAI
    '{"error": {"message": "This model\'s maximum context length is 128000 tokens. However, your messages resulted '
    'in 130000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}',
    # vLLM, old and new
    "This model's maximum context length is 16384 tokens. However, you requested 19591 tokens (9591 in the messages, "
    "10000 in the completion). Please reduce the length of the messages or completion.",
    "'max_tokens' or 'max_completion_tokens' is too large: 2000. This model's maximum context length is 4096 tokens "
    "and your request has 2104 input tokens (2000 > 4096 - 2104).",
    "The prompt (total length 25938) is too long to fit into the model (context length 4096).",
    "The decoder prompt (length 9000) is longer than the maximum model length of 8192.",
    # llama.cpp
    '{"error": {"code": 400, "message": "request (12062 tokens) exceeds the available context size (8192 tokens)", '
    '"type": "exceed_context_size_error", "n_prompt_tokens": 12062, "n_ctx": 8192}}',
    "the request exceeds the available context size, try increasing it",
    # SGLang
    "The input (61709 tokens) is longer than the model's context length (40960 tokens).",
    "Input length (160062 tokens) exceeds the maximum allowed length (59862 tokens).",
    # Ollama
    "the input length exceeds the context length",
    # Anthropic-style proxies
    "prompt is too long: 210000 tokens > 200000 maximum",
])
def test_each_servers_overflow_reply_is_recognised(text):
    assert is_overflow(text)


@pytest.mark.parametrize("text", [
    "response_format json_schema is not supported", "Incorrect API key provided", "The model `x` does not exist",
    "temperature must be between 0 and 2", "",
])
def test_other_errors_are_not_overflows(text):
    assert not is_overflow(text)


@pytest.mark.parametrize("text, stated", [
    ("request (3995 tokens) exceeds the available context size (2048 tokens), try increasing it", (2048, 3995)),
    ("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the "
     "messages, 1000 in the completion).", (4096, None)),  # vLLM's "requested" counts the reply too
    ("The prompt (total length 9000) is too long to fit into the model (context length 8192)", (8192, 9000)),
    ("The input (61709 tokens) is longer than the model's context length (40960 tokens).", (40960, 61709)),
    ("prompt is too long: 300000 tokens > 200000 maximum", (200000, 300000)),
    ("input length exceeds the context length", None),  # Ollama states no number
])
def test_the_window_a_too_long_reply_states_is_read(text, stated):
    assert stated_limit(text) == stated


def test_a_learned_window_only_shrinks_and_scales_with_the_servers_count():
    window = Window.of(8192)
    assert window.learn(2048, 2676, 2500) and window.stated == 2048
    assert window.planning == int(2048 / (2676 / 2500)), "planned in r3con's estimate, which undercounts here"
    assert not window.learn(4096, None, 100), "a larger stated window teaches nothing"
    assert window.to_dict()["learned_from"] == [{"window": 2048, "request_tokens": 2676, "estimated_tokens": 2500}]


async def test_max_tokens_is_kept_inside_the_window_and_a_refusal_teaches_it():
    inner = ScriptedLLM(default="a note.", replies=[ContextTooLong("x: the request is longer than the model's context window (request "
                                                "(3000 tokens) exceeds the available context size (2048 tokens))",
                                                status=400)])
    window = Window.of(8192)
    layer = Shaped(Overflows(inner, window), lambda stage: None, "m", window=window)
    big = ChatRequest(messages=(Message("user", "word " * 2000),), stage="relevance", max_tokens=4096)
    with pytest.raises(ContextTooLong):
        await layer.complete(big)
    assert inner.history[0].max_tokens == 4096, "it fitted the window as configured"
    assert window.stated == 2048
    await layer.complete(big)
    assert inner.history[1].max_tokens == 64, "what is left of the learned window, at least 64"


async def test_the_estimate_is_made_only_when_the_reply_might_not_fit_and_then_caps_as_before(monkeypatch):
    import r3con.llm.window as overflow

    made = []
    real = overflow.prompt_estimate
    monkeypatch.setattr(overflow, "prompt_estimate", lambda request: made.append(1) or real(request))
    inner = ScriptedLLM(default="a note.")
    window = Window.of(8192)
    layer = Shaped(Overflows(inner, window), lambda stage: None, "m", window=window)
    await layer.complete(ChatRequest(messages=(Message("user", "word " * 200),), stage="relevance", max_tokens=4096))
    assert made == [] and inner.history[-1].max_tokens == 4096  # 1,000 characters: room whatever they are
    cjk = ChatRequest(messages=(Message("user", "中" * 6000),), stage="relevance", max_tokens=4096)
    await layer.complete(cjk)
    assert made == [1] and inner.history[-1].max_tokens == 8192 - real(cjk)  # 6,600 estimated: capped as before


def test_a_window_no_reply_states_is_halved_down_to_the_floor_and_never_grows():
    window = Window.of(32_768)
    assert window.halve(20_000) and window.planning == 10_000
    assert window.halve(10_000) and window.planning == 5_000
    assert window.halve(5_000) and window.planning == 2_500
    assert window.halve(2_500) and window.planning == FLOOR_WINDOW
    assert not window.halve(2_000) and window.planning == FLOOR_WINDOW, "the floor holds"
    small = Window.of(1_500)  # a window stated below the floor is not raised to it
    assert not small.halve(1_400) and small.planning == 1_500
