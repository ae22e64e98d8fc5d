"""What a reply says, read the one way every stage, baseline and layer reads it: without thinking blocks,
and the final answer after its last "Answer:" marker."""

from __future__ import annotations

import re

from .types import Completion

_THINK = re.compile(r"<think>.*?</think>", flags=re.DOTALL)
_ANSWER = "Answer:"


def without_thinking(text: str) -> str:
    """`text` without `<think>` blocks: a block whose opening tag the server dropped ends at the last
    `</think>`; an unterminated one (the model thought until max_tokens) runs to the end."""
    text = _THINK.sub("", text)
    end = text.rfind("</think>")
    if end >= 0:
        text = text[end + len("</think>"):]
    start = text.find("<think>")
    return (text[:start] if start >= 0 else text).strip()


def reply_text(completion: Completion) -> str:
    """The reply without thinking; the reasoning content when that is all the reply holds."""
    return without_thinking(completion.content or "") or (completion.reasoning or "").strip()


def final_answer_line(text: str) -> str:
    """The text after the last 'Answer:' marker, or the whole text when there is none."""
    idx = text.rfind(_ANSWER)
    return text[idx + len(_ANSWER):].strip() if idx >= 0 else text.strip()
