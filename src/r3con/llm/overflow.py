"""Recognise a server's "the request is longer than the context window" reply, whichever server sent it.

The stages split a document or give fewer notes on `ContextTooLong`, instead of counting a failure,
so each common server's own words must be recognised (they differ, and some send HTTP 500):

- OpenAI: code `context_length_exceeded`, "This model's maximum context length is N tokens ..."
- vLLM: "This model's maximum context length is N tokens. However, you requested M tokens ...",
  "'max_tokens' or 'max_completion_tokens' is too large: ...", "The prompt (total length N) is too
  long to fit into the model (context length M)", "... is longer than the maximum model length of N"
- llama.cpp: "request (12062 tokens) exceeds the available context size (8192 tokens)", type
  `exceed_context_size_error`
- SGLang: "The input (61709 tokens) is longer than the model's context length (40960 tokens).",
  "Input length (N tokens) exceeds the maximum allowed length (M tokens)."
- Ollama: "input length exceeds the context length" (it truncates silently unless told not to)
- Anthropic-style proxies: "prompt is too long: N tokens > M maximum"
"""

from __future__ import annotations

import re

_OVERFLOW = re.compile(
    r"context_length_exceeded|exceed_context_size|maximum context length|context length (?:is|of|exceeded)"
    r"|exceeds? the (?:available |maximum )?context (?:size|length|window)|longer than the model'?s context length"
    r"|longer than the maximum model length|too long to fit into the model|exceeds the maximum allowed length"
    r"|input length exceeds|prompt is too long|maximum input length|context window (?:is )?(?:full|exceeded)"
    r"|'max_tokens' or 'max_completion_tokens' is too large|input tokens exceed the configured limit",
    re.IGNORECASE,
)


def is_overflow(text: str) -> bool:
    """Whether an error reply's message or body says the request does not fit the model's window."""
    return bool(_OVERFLOW.search(text or ""))
