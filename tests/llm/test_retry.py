"""Retries: which failures, how long to wait (Retry-After, backoff with jitter), budgets, and over HTTP."""

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from r3con.config import Settings
from r3con.errors import ContextTooLong, ProviderError
from r3con.llm.layers.retry import RetryBudget, Retrying, RetryPolicy
from r3con.llm.transport.client import OpenAIChat, retry_after_s
from r3con.llm.types import ChatRequest, Completion, Message, Usage
from r3con.testing import FakeLLMServer, FaultPlan

from ..fakes import ScriptedLLM

REQUEST = ChatRequest(messages=(Message("user", "<task>q</task> hello"),), stage="relevance", model="m")


def flaky(*errors: Exception) -> ScriptedLLM:
    """Raises the given errors in turn, then answers "ok"."""
    return ScriptedLLM(default=Completion(content="ok", finish_reason="stop", model="m", usage=Usage(calls=1)),
                       replies=errors)


class Sleeps:
    def __init__(self):
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def retrying(inner, retries=6, budget=100, base=0.5, max_s=60.0):
    sleep = Sleeps()
    layer = Retrying(inner, RetryPolicy(retries, base, max_s), RetryBudget(budget), "http://ep/v1", sleep=sleep, seed=1)
    return layer, sleep


async def test_retry_after_is_honoured_and_retries_are_counted():
    inner = flaky(ProviderError("429", status=429, retry_after=2.5), ProviderError("503", status=503, retry_after=0.1))
    layer, sleep = retrying(inner)
    completion = await layer.complete(REQUEST)
    assert completion.content == "ok" and len(inner.history) == 3
    assert sleep.waits == [2.5, 0.1]
    # the 429 spent a retry; the 503 (a server down or loading) is a wait, which spends none
    assert completion.usage.events == {"retries": 1, "waits": 1}


async def test_backoff_is_exponential_with_full_jitter_and_capped():
    policy = RetryPolicy(retries=10, base_s=1.0, max_s=8.0)
    rng = random.Random(0)
    for attempt in range(8):
        waits = [policy.delay(attempt, None, rng) for _ in range(200)]
        bound = min(8.0, 2.0**attempt)
        assert all(0 <= w <= bound for w in waits)
        assert max(waits) > 0.8 * bound  # full jitter spans the whole range
    assert policy.delay(0, 100.0, rng) == 8.0  # an endpoint's Retry-After is capped too


@pytest.mark.parametrize("error", [
    ProviderError("timed out"),  # no status: timeout or dropped connection
    ProviderError("overloaded", status=529),
    ProviderError("conflict", status=409),
])
async def test_transient_failures_are_retried(error):
    inner = flaky(error)
    layer, sleep = retrying(inner)
    assert (await layer.complete(REQUEST)).content == "ok"
    assert len(inner.history) == 2 and len(sleep.waits) == 1


@pytest.mark.parametrize("error", [
    ProviderError("bad request", status=400),
    ProviderError("not found", status=404),
    ContextTooLong("too long", status=400),
])
async def test_request_errors_are_not_retried(error):
    inner = flaky(error)
    layer, sleep = retrying(inner)
    with pytest.raises(type(error)):
        await layer.complete(REQUEST)
    assert len(inner.history) == 1 and sleep.waits == []


async def test_a_call_gives_up_after_its_retries_naming_the_endpoint_and_last_error():
    inner = flaky(*[ProviderError(f"HTTP 500 number {i}", status=500) for i in range(10)])
    layer, sleep = retrying(inner, retries=3)
    with pytest.raises(ProviderError) as info:
        await layer.complete(REQUEST)
    message = str(info.value)
    assert "http://ep/v1" in message and "after 4 attempts" in message and "HTTP 500 number 3" in message
    assert len(inner.history) == 4 and len(sleep.waits) == 3
    assert info.value.usage.events == {"retries": 3}


async def test_the_runs_retry_budget_is_shared_and_bounded():
    budget = RetryBudget(3)
    sleep = Sleeps()
    inner = flaky(*[ProviderError("HTTP 500", status=500) for _ in range(10)])
    layer = Retrying(inner, RetryPolicy(retries=6, base_s=0.01), budget, "http://ep/v1", sleep=sleep)
    with pytest.raises(ProviderError, match="retry budget of 3 is spent"):
        await layer.complete(REQUEST)
    assert len(inner.history) == 4 and budget.spent == 3
    with pytest.raises(ProviderError, match="retry budget"):  # the next call has none left either
        await layer.complete(REQUEST)
    assert len(inner.history) == 5


def test_retry_after_headers():
    assert retry_after_s({"Retry-After": "3"}) == 3.0
    assert retry_after_s({"retry-after-ms": "250", "Retry-After": "3"}) == 0.25
    assert retry_after_s({}) is None
    assert retry_after_s({"Retry-After": "soon"}) is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= retry_after_s({"Retry-After": later}) <= 31


def _client(server, **kw) -> OpenAIChat:
    return OpenAIChat(Settings.resolve(env={}, base_url=server.base_url, model="m", **kw))


async def test_http_429_carries_retry_after_and_5xx_its_status():
    with FakeLLMServer(faults=FaultPlan.parse("429=1.0,retry_after=0.3,max=1")) as server:
        client = _client(server)
        with pytest.raises(ProviderError) as info:
            await client.complete(REQUEST)
        assert info.value.status == 429 and info.value.retry_after == pytest.approx(0.3)
        await client.aclose()
    with FakeLLMServer(faults=FaultPlan.parse("500=1.0,max=1")) as server:
        client = _client(server)
        with pytest.raises(ProviderError) as info:
            await client.complete(REQUEST)
        assert info.value.status == 500 and info.value.retry_after is None
        await client.aclose()


@pytest.mark.parametrize("fault, words", [("hang", "timed out"), ("drop", "connection failed")])
async def test_hangs_and_dropped_connections_are_retried_over_http(fault, words):
    with FakeLLMServer(faults=FaultPlan.parse(f"{fault}=1.0,max=2,hang_s=2")) as server:
        client = _client(server, request_timeout_s=0.5)
        with pytest.raises(ProviderError, match=words) as info:
            await client.complete(REQUEST)
        assert info.value.status is None
        layer, sleep = retrying(client, base=0.01)
        completion = await layer.complete(REQUEST)
        await client.aclose()
        assert completion.content and completion.usage.events == {"retries": 1}
        assert [c["fault"] for c in server.calls()] == [fault, fault, "ok"]


async def test_one_call_stops_retrying_at_its_time_limit():
    inner = flaky(ProviderError("429", status=429, retry_after=20), ProviderError("429", status=429, retry_after=20))
    sleep = Sleeps()
    layer = Retrying(inner, RetryPolicy(6, 0.5, 60.0, call_s=30.0), RetryBudget(100), "http://ep/v1", sleep=sleep)
    with pytest.raises(ProviderError, match="at the one-call limit of 30 s"):
        await layer.complete(REQUEST)
    assert sleep.waits == [20] and len(inner.history) == 2, "the second wait would end past 30 s"


def refused() -> ProviderError:
    """What the transport raises when nothing listens: a ProviderError caused by a refused connection."""
    try:
        raise ConnectionRefusedError(111, "Connection refused")
    except ConnectionRefusedError as cause:
        error = ProviderError("http://ep/v1: cannot connect to http://ep/v1/chat/completions")
        error.__cause__ = cause
        return error


async def test_a_restarting_server_is_waited_for_without_spending_the_retry_budget():
    loading = [ProviderError("HTTP 503: Loading model", status=503) for _ in range(12)]
    inner = flaky(*[refused() for _ in range(12)], *loading)
    sleep, budget = Sleeps(), RetryBudget(3)
    layer = Retrying(inner, RetryPolicy(retries=2, base_s=0.5, outage_s=240.0), budget, "http://ep/v1", sleep=sleep)
    completion = await layer.complete(REQUEST)
    assert completion.content == "ok" and len(inner.history) == 25
    assert budget.spent == 0, "waiting for a server that is down costs no tokens, so no retries of the budget"
    assert max(sleep.waits) == 10.0 and 120 < sum(sleep.waits) <= 240, sleep.waits
    assert completion.usage.events == {"waits": 24}, "outage waits are counted as waits, not retries"


async def test_an_outage_longer_than_outage_s_gives_up_saying_what_helps():
    inner = flaky(*[refused() for _ in range(100)])
    sleep = Sleeps()
    layer = Retrying(inner, RetryPolicy(retries=2, base_s=0.5, outage_s=60.0), RetryBudget(100), "http://ep/v1",
                     sleep=sleep)
    with pytest.raises(ProviderError, match=r"unavailable for \d+ s \(R3CON_OUTAGE_S=60\).*start the server"):
        await layer.complete(REQUEST)
    assert sum(sleep.waits) <= 60


async def test_a_timeout_says_to_lower_the_concurrency_or_raise_the_limits():
    inner = flaky(*[ProviderError("http://ep/v1: request timed out (after 300 s)") for _ in range(5)])
    layer = Retrying(inner, RetryPolicy(retries=1, base_s=0.0), RetryBudget(100), "http://ep/v1", sleep=Sleeps())
    with pytest.raises(ProviderError, match=r"lower --concurrency .* raise --timeout and R3CON_MAX_CALL_S"):
        await layer.complete(REQUEST)
