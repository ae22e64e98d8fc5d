"""Replies are read one way everywhere: thinking removed, the final answer after its last marker."""

from __future__ import annotations

from r3con.llm.replies import final_answer_line, reply_text, without_thinking
from r3con.llm.types import Completion, Usage


def test_thinking_is_removed_whether_closed_unclosed_or_missing_its_opening_tag():
    assert without_thinking("<think>count them</think>\nThree people.") == "Three people."
    assert without_thinking("a <think>x</think>b<think>y</think> c") == "a b c"
    assert without_thinking("count them first...</think>Three people.") == "Three people."  # opening tag dropped
    assert without_thinking("<think>I ran out of tokens while") == ""  # thought until max_tokens: no answer
    assert without_thinking("Answer: 3") == "Answer: 3"


def reply(content: str, reasoning: str | None) -> Completion:
    return Completion(content=content, finish_reason="stop", usage=Usage(), model="m", reasoning=reasoning)


def test_a_reply_only_in_reasoning_content_is_still_read():
    assert reply_text(reply("", " 42 ")) == "42"
    assert reply_text(reply("<think>hm</think>", "the notes say 42")) == "the notes say 42"
    assert reply_text(reply("<think>hm</think>7", "r")) == "7"


def test_the_final_answer_is_after_the_last_marker():
    assert final_answer_line("Answer: draft\nchecking...\nAnswer: 12 people") == "12 people"
    assert final_answer_line("  just text ") == "just text"
