"""Each common server's "too long for the window" reply is recognised; other 400s are not."""

import pytest

from r3con.llm.overflow import is_overflow


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
