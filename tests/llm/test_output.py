"""Reply checks: cut replies are kept for what they completed, empty ones are asked again, refusals fail, all counted."""

import pytest

from r3con.errors import OutputError, ProviderError
from r3con.llm.layers.output import OutputChecked
from r3con.llm.layers.retry import RetryBudget
from r3con.llm.types import ChatRequest, Completion, Message, Usage

REQUEST = ChatRequest(messages=(Message("user", "hi"),), stage="populate", model="m", max_tokens=1000)


class Script:
    """Answers with the given completions in turn and keeps the requests."""

    def __init__(self, *replies: Completion | Exception):
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def c(content="ok", finish="stop", **kw) -> Completion:
    return Completion(content=content, finish_reason=finish, model="m",
                      usage=Usage(calls=1, prompt_tokens=10, completion_tokens=5), **kw)


def checked(inner, budget=10):
    return OutputChecked(inner, RetryBudget(budget))


SCHEMA_REQUEST = ChatRequest(messages=(Message("user", "hi"),), stage="populate", model="m", max_tokens=1000,
                             response_schema={"type": "object"}, schema_name="records")


async def test_a_cut_note_is_kept_to_its_last_sentence_and_marked_never_asked_again():
    inner = Script(c("Mina wrote to Lucy. The storm came and the ship", "length"), c("never asked"))
    completion = await checked(inner).complete(REQUEST)
    assert completion.content == "Mina wrote to Lucy. (cut)" and completion.finish_reason == "length"
    assert len(inner.requests) == 1 and completion.usage.calls == 1
    assert completion.usage.events == {"length": 1, "cut_kept": 1}


async def test_a_cut_json_reply_keeps_the_records_it_completed():
    cut = '{"records": [{"name": "Mina", "_passage": "Mina wrote"}, {"name": "Lu'
    completion = await checked(Script(c(cut, "length"))).complete(SCHEMA_REQUEST)
    assert completion.content == '{"records": [{"name": "Mina", "_passage": "Mina wrote"}]}'


async def test_a_repetition_loop_is_stopped_where_it_began():
    loop = "The count is here. " + "He is in the house. " * 40 + "He is in the"
    completion = await checked(Script(c(loop, "length"))).complete(REQUEST)
    assert completion.content == "The count is here. He is in the house. (cut)"


async def test_a_cut_reply_with_nothing_complete_is_asked_once_more_at_the_same_budget():
    inner = Script(c("askdjh qwe zxc", "length"), c("A whole sentence."))
    completion = await checked(inner).complete(REQUEST)
    assert completion.content == "A whole sentence." and [r.max_tokens for r in inner.requests] == [1000, 1000]
    inner = Script(c("askdjh qwe zxc", "length"), c("zxc qwe", "length"), c("never asked"))
    with pytest.raises(OutputError, match="cut at max_tokens=1000 with nothing complete") as info:
        await checked(inner).complete(REQUEST)
    assert len(inner.requests) == 2 and info.value.usage.calls == 2 and info.value.usage.events == {"length": 2}


async def test_empty_replies_are_asked_again_then_fail():
    inner = Script(c(""), c("<think>only thinking</think>"), c("an answer"))
    completion = await checked(inner).complete(REQUEST)
    assert completion.content == "an answer" and completion.usage.events == {"empty": 2}
    with pytest.raises(OutputError, match="empty after 3 attempts"):
        await checked(Script(c(""), c(""), c(""))).complete(REQUEST)


async def test_content_only_in_reasoning_is_passed_on_and_counted():
    completion = await checked(Script(c("", reasoning='{"rows": []}'))).complete(REQUEST)
    assert completion.reasoning == '{"rows": []}' and completion.usage.events == {"reasoning_only": 1}


@pytest.mark.parametrize("reply", [c("", refusal="I cannot help with that."), c("", "content_filter")])
async def test_refusals_fail_at_once(reply):
    inner = Script(reply, c("never asked"))
    with pytest.raises(OutputError, match="refused") as info:
        await checked(inner).complete(REQUEST)
    assert len(inner.requests) == 1 and info.value.usage.events == {"refusals": 1}


async def test_re_asks_spend_the_runs_retry_budget():
    inner = Script(c(""), c(""), c("fine"))
    with pytest.raises(OutputError):
        await checked(inner, budget=1).complete(REQUEST)
    assert len(inner.requests) == 2


async def test_errors_below_carry_the_usage_of_earlier_attempts():
    inner = Script(c(""), ProviderError("HTTP 500", status=500))
    with pytest.raises(ProviderError) as info:
        await checked(inner).complete(REQUEST)
    assert info.value.usage.calls == 1 and info.value.usage.events == {"empty": 1}


async def test_a_cut_chinese_note_is_kept_to_its_last_full_stop():
    cut = "公司第一季度报告未经审计。法定代表人：王军。金利华电股份有限公"
    completion = await checked(Script(c(cut, "length"))).complete(REQUEST)
    assert completion.content == "公司第一季度报告未经审计。法定代表人：王军。 (cut)"
