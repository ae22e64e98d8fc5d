"""Long waits are said and bounded (Retry-After past the one-call limit ends the call at once), and a run
folder's own record of answered calls serves them again."""

import asyncio
import json

import pytest

from r3con.display import PlainProgress
from r3con.errors import ProviderError
from r3con.llm.layers.answered import Answered
from r3con.llm.layers.replay import LoggedReplies
from r3con.llm.layers.retry import RetryBudget, Retrying, RetryPolicy
from r3con.llm.types import ChatRequest, Completion, Message, Usage

from ..fakes import ScriptedLLM
from .test_retry import REQUEST, Sleeps, flaky


def _layer(inner, call_s=300.0):
    sleep = Sleeps()
    layer = Retrying(inner, RetryPolicy(6, 0.5, 60.0, call_s=call_s), RetryBudget(100), "http://ep/v1", sleep=sleep,
                     seed=1)
    return layer, sleep


async def test_a_retry_after_past_the_call_limit_ends_the_call_at_once():
    inner = flaky(ProviderError("rate limited", status=429, retry_after=3600))
    layer, sleep = _layer(inner)
    with pytest.raises(ProviderError) as caught:
        await layer.complete(REQUEST)
    assert sleep.waits == [] and len(inner.history) == 1, "no sleep into the limit, no second attempt"
    message = str(caught.value)
    assert "asks to wait 3600 s (Retry-After), longer than the one-call limit of 300 s (R3CON_MAX_CALL_S)" in message
    assert "--resume" in message and caught.value.status == 429 and caught.value.retry_after == 3600


async def test_a_retry_after_within_the_call_limit_is_waited_and_said():
    inner = flaky(ProviderError("rate limited", status=429, retry_after=5))
    layer, sleep = _layer(inner)
    heard: list[str] = []
    layer.retrier.subscribe(heard.append)
    assert (await layer.complete(REQUEST)).content == "ok"
    assert sleep.waits == [5]
    (line,) = heard
    assert line.startswith("waiting 5 s for http://ep/v1 (a rate limit (HTTP 429); it asked for 5 s) until ")
    assert line.endswith("; Ctrl-C stops, --resume continues")


async def test_short_backoffs_are_not_said():
    layer, sleep = _layer(flaky(ProviderError("down", status=503)))
    heard: list[str] = []
    layer.retrier.subscribe(heard.append)
    await layer.complete(REQUEST)
    assert len(sleep.waits) == 1 and sleep.waits[0] < 1 and heard == []


def test_the_plain_progress_prints_the_wait(capsys):
    import sys

    progress = PlainProgress(stream=sys.stderr)
    progress.note("waiting 30 s for http://ep/v1 (a rate limit (HTTP 429)) until 12:00:00")
    assert "waiting 30 s for http://ep/v1" in capsys.readouterr().err


def _record(request: ChatRequest, content: str, **extra) -> str:
    return json.dumps({"stage": request.stage, "request_hash": request.fingerprint(), "model": "m",
                       "finish_reason": "stop", "usage": {"calls": 1, "prompt_tokens": 10, "completion_tokens": 2,
                                                          "events": {"retries": 1}},
                       "response": {"content": content, "reasoning": None}, **extra})


def test_replies_are_read_from_calls_jsonl_but_not_failed_cut_or_tool_calls(tmp_path):
    other = ChatRequest(messages=(Message("user", "other"),), stage="relevance", model="m")
    third = ChatRequest(messages=(Message("user", "third"),), stage="relevance", model="m")
    log = tmp_path / "calls.jsonl"
    log.write_text("\n".join([
        _record(REQUEST, "a note"),
        _record(other, "", error="ProviderError: HTTP 500"),
        _record(third, "x", response={"content": "", "tool_calls": [{"id": "1"}]}),
        '{"stage": "relevance", "request_hash": "cut',  # a line cut by a killed run
    ]) + "\n")
    replies = LoggedReplies(log)
    reply = replies.get(REQUEST.fingerprint())
    assert reply is not None and reply.content == "a note" and reply.from_cache
    assert reply.usage == Usage(calls=1, prompt_tokens=10, completion_tokens=2)
    assert replies.get(other.fingerprint()) is None and replies.get(third.fingerprint()) is None
    assert replies.get("cut") is None
    replies.close()
    assert len(LoggedReplies(tmp_path / "missing.jsonl")) == 0


def test_the_last_usable_reply_of_a_request_is_served_and_no_reply_is_held(tmp_path):
    """A request logged twice (answered, then failed when asked again) is served its answered reply; the
    index holds offsets, not replies, and a reply quoting a request_hash key does not confuse it."""
    log = tmp_path / "calls.jsonl"
    quoting = ChatRequest(messages=(Message("user", "quote"),), stage="relevance", model="m")
    log.write_text("\n".join([
        _record(REQUEST, "first answer"),
        _record(quoting, f'"request_hash": "{REQUEST.fingerprint()}"'),
        _record(REQUEST, "", error="ProviderError: HTTP 500"),
    ]) + "\n")
    replies = LoggedReplies(log)
    assert replies.get(REQUEST.fingerprint()).content == "first answer"
    assert replies.get(quoting.fingerprint()).content.startswith('"request_hash"')
    assert all(isinstance(offsets, list) for offsets in replies._at.values()) and len(replies) == 2
    replies.close()


async def test_a_recorded_reply_is_served_and_an_unusable_one_asked_again(tmp_path):
    log = tmp_path / "calls.jsonl"
    cut = ChatRequest(messages=(Message("user", "long"),), stage="relevance", model="m")
    log.write_text(_record(REQUEST, "a note") + "\n" + _record(cut, "half a no", finish_reason="length") + "\n")
    inner = ScriptedLLM(default=Completion(content="fresh", finish_reason="stop", model="m", usage=Usage(calls=1)))
    replies = LoggedReplies(log)
    layer = Answered(inner, folder=replies.get)
    served = await layer.complete(REQUEST)
    assert served.content == "a note" and served.from_cache and inner.history == []
    assert (await layer.complete(cut)).content == "fresh" and len(inner.history) == 1
    replies.close()


async def test_calls_that_wait_together_are_said_once():
    layer, sleep = _layer(flaky(*[ProviderError("rate limited", status=429, retry_after=5)] * 4))
    heard: list[str] = []
    layer.retrier.subscribe(heard.append)
    await asyncio.gather(*(layer.complete(REQUEST) for _ in range(4)))
    assert sleep.waits == [5, 5, 5, 5] and len(heard) == 1, heard
