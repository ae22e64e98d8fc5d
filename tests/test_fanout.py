"""The per-document error boundary: a document's own failure is recorded, anything else stops the stage as it was."""

from __future__ import annotations

import asyncio
import json

import pytest

from r3con.errors import BudgetExceeded, ConfigError, InputError, OutputError, ProviderError, RunFailed
from r3con.results import Failure
from r3con.stages.fanout import cause_of, check_failed_share, fan_out, server_words

SERVER_500 = json.dumps({"error": {"message": "internal error", "type": "server_error"}})


def refused() -> ProviderError:
    """A ProviderError raised, as the client raises it, from a refused connection."""
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as exc:
            raise ProviderError("http://127.0.0.1:9/v1: request connection failed (Connection error.)",
                                endpoint="http://127.0.0.1:9/v1") from exc
    except ProviderError as exc:
        return exc


async def test_a_documents_provider_failure_becomes_its_failure_with_the_cause_and_the_rest_go_on():
    async def call(n: int) -> str:
        await asyncio.sleep(0.01 * (3 - n))  # finish out of order
        if n == 2:
            raise ProviderError("http://x/v1: giving up after 3 attempts; last error: HTTP 500", status=500,
                                body=SERVER_500, endpoint="http://x/v1")
        return f"note {n}"

    results = await fan_out("relevance", [1, 2, 3], call, key=str, context="round 1")
    assert results[0] == "note 1" and results[2] == "note 3"  # in the order of the items
    failure = results[1]
    assert isinstance(failure, Failure) and failure.doc == "2" and failure.stage == "relevance"
    assert failure.cause == "HTTP 500 from the endpoint: internal error"
    assert failure.error.startswith("round 1: http://x/v1: giving up")


async def test_unusable_output_is_the_documents_failure_too():
    async def call(n: int) -> int:
        raise OutputError("records did not match the schema after 3 attempts (at the top level: ...)")

    (failure,) = await fan_out("populate", [7], call, key=str)
    assert isinstance(failure, Failure) and failure.cause.startswith("records did not match the schema")


@pytest.mark.parametrize("error", [
    BudgetExceeded("the next call could cost $0.01 more than --max-cost $0.05 allows; rerun with a higher --max-cost"),
    ConfigError("http://x/v1 refused the API key; set OPENAI_API_KEY or pass --api-key"),
    InputError("a document is unusable"),
], ids=["budget", "config", "input"])
async def test_an_r3con_stop_propagates_unchanged_after_the_calls_under_way_come_back(error):
    finished: list[int] = []

    async def call(n: int) -> int:
        if n == 1:
            raise error
        await asyncio.sleep(0.05)  # a call already sent: paid for, so its reply is kept (the cache stores it)
        finished.append(n)
        return n

    with pytest.raises(type(error)) as raised:
        await fan_out("populate", [1, 2, 3], call, key=str)
    assert raised.value is error  # the very exception: not a Failure, not rewrapped
    assert sorted(finished) == [2, 3]


async def test_no_item_starts_after_a_stop():
    started: list[int] = []

    async def call(n: int) -> int:
        started.append(n)
        if n == 1:
            raise BudgetExceeded("--max-cost reached")
        return n

    with pytest.raises(BudgetExceeded):
        await fan_out("populate", [1, 2, 3, 4], call, key=str, limit=1)
    assert started == [1]


async def test_a_bug_cancels_the_other_documents_and_propagates_unchanged():
    finished: list[int] = []
    bug = KeyError("a bug")

    async def call(n: int) -> int:
        if n == 1:
            raise bug
        await asyncio.sleep(5)  # would finish long after; must be cancelled instead
        finished.append(n)
        return n

    with pytest.raises(KeyError) as raised:
        await asyncio.wait_for(fan_out("populate", [1, 2, 3], call, key=str), timeout=2)
    assert raised.value is bug and finished == []


async def test_at_most_limit_items_run_at_once():
    running = peak = 0

    async def call(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return n

    assert await fan_out("s", list(range(10)), call, key=str, limit=3) == list(range(10))
    assert peak == 3


async def test_chains_each_take_a_contiguous_run_one_item_after_the_other():
    started: list[int] = []
    running: set[int] = set()

    async def call(n: int) -> int:
        chain = min(n // 3, 2)  # 10 items in 3 chains: 0-2, 3-5, 6-9
        assert not {m for m in running if min(m // 3, 2) == chain}, "one item of a chain at a time"
        running.add(n)
        started.append(n)
        await asyncio.sleep(0.001 * (10 - n))  # later chains' items finish sooner: no chain waits for another
        running.discard(n)
        return n

    assert await fan_out("s", list(range(10)), call, key=str, limit=8, chains=3) == list(range(10))
    assert started[:3] == [0, 3, 6], "each chain starts at its run's first item"
    for chain in ([0, 1, 2], [3, 4, 5], [6, 7, 8, 9]):
        assert [n for n in started if n in chain] == chain, "a chain's items in order"


def test_causes_say_status_and_server_words_connection_refused_or_timeout():
    assert cause_of(refused()) == "connection refused at http://127.0.0.1:9/v1"
    try:
        try:
            raise TimeoutError()
        except TimeoutError as exc:
            raise ProviderError("http://x/v1: request timed out (after 30 s)", endpoint="http://x/v1") from exc
    except ProviderError as timed_out:
        assert cause_of(timed_out) == "timed out after 30 s at http://x/v1"
    too_long = ProviderError("x", status=400, body=json.dumps(
        {"error": {"code": 400, "message": "request (12062 tokens) exceeds the available context size (8192 tokens)"}}))
    assert cause_of(too_long) == ("HTTP 400 from the endpoint: request (12062 tokens) exceeds the available "
                                  "context size (8192 tokens)")
    assert cause_of(ProviderError("x", status=501, body="<html><h1>501 Not Implemented</h1></html>")) == \
        "HTTP 501 from the endpoint: 501 Not Implemented"
    assert server_words(json.dumps({"detail": "Not Found"})) == "Not Found"
    assert len(server_words("x" * 5000)) == 200


def test_the_failed_share_names_the_common_cause_and_a_flag_that_exists():
    same = [Failure("relevance", str(n), f"round 1: {n}", "HTTP 400 from the endpoint: too long") for n in range(1, 59)]
    with pytest.raises(RunFailed) as raised:
        check_failed_share("relevance", same, 58, 0.5)
    message = str(raised.value)
    assert message == ("all 58 documents failed in relevance: HTTP 400 from the endpoint: too long (more than "
                       "--max-failed-share 50%); fix what the endpoint refused (calls.jsonl in the run folder has "
                       "every call)")
    mixed = same[:20] + [Failure("relevance", str(n), "e", "connection refused at http://x") for n in range(21, 31)]
    with pytest.raises(RunFailed, match=r"30 of 58 documents failed in relevance, 20 of them with HTTP 400 .* "
                                        r"\(and 1 other cause\)"):
        check_failed_share("relevance", mixed, 58, 0.5)
    check_failed_share("relevance", same[:29], 58, 0.5)  # half: still under the share, the run goes on
    check_failed_share("populate", same, 58, 0.5)  # another stage's failures do not count
