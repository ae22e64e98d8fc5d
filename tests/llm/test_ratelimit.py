"""Requests- and tokens-per-minute limits, on a simulated clock."""

import asyncio

from r3con.llm.layers.limits import RateLimited, request_tokens
from r3con.llm.types import ChatRequest, Completion, Message, Usage


class Clock:
    def __init__(self):
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(round(seconds, 6))
        self.now += seconds


class Echo:
    def __init__(self, clock):
        self.clock = clock
        self.sent_at: list[float] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.sent_at.append(self.clock.now)
        return Completion(content="ok", finish_reason="stop", model="m", usage=Usage(calls=1))


def req(chars: int = 40, max_tokens: int | None = 10) -> ChatRequest:
    return ChatRequest(messages=(Message("user", "x" * chars),), stage="relevance", max_tokens=max_tokens)


async def test_rpm_spaces_requests_over_a_sliding_minute():
    clock = Clock()
    inner = Echo(clock)
    layer = RateLimited(inner, rpm=2, clock=clock, sleep=clock.sleep)
    for _ in range(5):
        await layer.complete(req())
    start = 1000.0
    assert [t - start for t in inner.sent_at] == [0, 0, 60, 60, 120]


async def test_tpm_counts_estimated_tokens_of_the_request_and_its_reply_budget():
    clock = Clock()
    inner = Echo(clock)
    tokens = request_tokens(req(400, 100))
    assert tokens > 100  # the messages count, not only the reply budget
    layer = RateLimited(inner, tpm=2 * tokens + 1, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        await layer.complete(req(400, 100))
    assert [t - 1000 for t in inner.sent_at] == [0, 0, 60]


async def test_a_request_larger_than_the_tpm_limit_still_goes_when_the_window_is_empty():
    clock = Clock()
    inner = Echo(clock)
    layer = RateLimited(inner, tpm=10, clock=clock, sleep=clock.sleep)
    await layer.complete(req(4000))
    await layer.complete(req(4000))
    assert [t - 1000 for t in inner.sent_at] == [0, 60]


async def test_concurrent_callers_are_admitted_in_order_within_the_limit():
    clock = Clock()
    inner = Echo(clock)
    layer = RateLimited(inner, rpm=3, clock=clock, sleep=clock.sleep)
    await asyncio.gather(*(layer.complete(req()) for _ in range(7)))
    assert [t - 1000 for t in inner.sent_at] == [0, 0, 0, 60, 60, 60, 120]


async def test_no_limits_means_no_waiting():
    clock = Clock()
    inner = Echo(clock)
    layer = RateLimited(inner, clock=clock, sleep=clock.sleep)
    await asyncio.gather(*(layer.complete(req()) for _ in range(50)))
    assert clock.waits == [] and len(inner.sent_at) == 50
