import asyncio
import json
from dataclasses import replace

import pytest

import r3con
from r3con.errors import BudgetExceeded, ConfigError
from r3con.llm.layers.budget import BudgetGuard, CostCap, spent_in
from r3con.llm.layers.calllog import CallLog, LogSummary
from r3con.llm.pricing import Price, PriceTable
from r3con.llm.types import ChatRequest, Message
from r3con.pipeline.method import run

from ..conftest import r3con_cli
from ..fakes import ScriptedLLM

PRICES = PriceTable({"scripted": Price(input=1.0, output=2.0)})  # USD per million tokens


def request(max_tokens: int = 1000) -> ChatRequest:
    return ChatRequest(messages=(Message("user", "x" * 400),), stage="relevance", model="scripted",
                       max_tokens=max_tokens)


async def test_the_guard_stops_before_the_call_that_could_pass_the_cap():
    llm = ScriptedLLM(default=lambda r: "y" * 4000)  # 1,000 completion tokens: $0.002 a call
    cap = CostCap(0.005)  # the worst case a reply may claim: 528 prompt tokens (a token per byte sent) + 1,064
    guard = BudgetGuard(llm, cap, PRICES)
    await guard.complete(request())
    await guard.complete(request())
    with pytest.raises(BudgetExceeded, match=r"--max-cost \$0.0050: \$0.0042 spent.*rerun the same command"):
        await guard.complete(request())
    assert len(llm.history) == 2, "the refused call never reached the endpoint"
    with pytest.raises(BudgetExceeded):  # once tripped, even a cheap call stops
        await guard.complete(request(max_tokens=1))
    assert cap.spent_usd == pytest.approx(0.0042, rel=0.01)


async def test_only_calls_in_flight_reserve_and_a_call_that_does_not_fit_yet_waits_for_room():
    in_flight = peak = 0

    class Slow(ScriptedLLM):
        async def complete(self, req):
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            return await super().complete(req)

    llm = Slow(default=lambda r: "ok")  # a cheap reply: about $0.0001 against a worst case of about $0.0027
    cap = CostCap(0.0055)  # room for two worst cases at a time
    guard = BudgetGuard(llm, cap, PRICES)
    outcomes = await asyncio.gather(*(guard.complete(request()) for _ in range(5)), return_exceptions=True)
    assert not [o for o in outcomes if isinstance(o, BaseException)], "every call fit once the ones before settled"
    assert peak == 2, "never more reserved than the cap can pay for"
    assert cap.spent_usd <= cap.limit_usd and cap.tripped is None


async def test_the_cap_trips_only_when_a_call_cannot_fit_with_nothing_in_flight():
    llm = ScriptedLLM(default=lambda r: "y" * 4000)  # $0.002 a call
    cap = CostCap(0.0101)
    outcomes = await asyncio.gather(*(BudgetGuard(llm, cap, PRICES).complete(request()) for _ in range(8)),
                                    return_exceptions=True)
    # 3 worst cases ($0.0027) at once, then a fourth once they settled at $0.0021 each
    assert sum(not isinstance(o, BaseException) for o in outcomes) == 4
    assert all(isinstance(o, BudgetExceeded) for o in outcomes if isinstance(o, BaseException))
    assert cap.spent_usd / cap.limit_usd > 0.8


async def test_earlier_spend_of_the_run_folder_counts_against_the_cap(tmp_path):
    log = tmp_path / "calls.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in [
        {"stage": "relevance", "usage": {"cost_usd": 0.003}},
        {"stage": "relevance", "from_cache": True, "usage": {"cost_usd": 0.5}},  # served by the cache: free
        {"stage": "schema", "error": "ProviderError: 500"},
    ]) + "\n{\"cut by a kill")
    assert spent_in(log) == pytest.approx(0.003)
    llm = ScriptedLLM(default=lambda r: "y" * 4000)  # $0.0021 a call, $0.0027 worst case
    with pytest.raises(BudgetExceeded, match=r"already spent \$0.0030 of --max-cost \$0.0040.*raise --max-cost"):
        await BudgetGuard(llm, CostCap(0.004, spent_before=spent_in(log)), PRICES).complete(request())
    assert llm.history == [], "no room for even one call: nothing was sent"
    guard = BudgetGuard(llm, CostCap(0.008, spent_before=spent_in(log)), PRICES)
    await guard.complete(request())
    await guard.complete(request())
    with pytest.raises(BudgetExceeded, match=r"\$0.0072 spent \(\$0.0030 of it by earlier attempts"):
        await guard.complete(request())


async def test_a_model_without_a_price_cannot_be_capped():
    guard = BudgetGuard(ScriptedLLM(default=lambda r: "ok"), CostCap(1.0), PriceTable({}))
    with pytest.raises(ConfigError, match="--max-cost needs a price for model 'scripted'"):
        await guard.complete(request())


def prices_file(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"r3con-scripted": {"input": 1.0, "output": 2.0}}))
    return path


TEXTS = [(f"Letter {i}", f"Ann Lee wrote to Bob Stone from Oslo on day {i} about the harbour. " * 20)
         for i in range(1, 7)]


async def test_a_run_stops_cleanly_at_the_cap_and_says_how_to_resume(fake_server, tmp_path):
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, api_key="x", out_dir=tmp_path / "runs",
                                      cache=False, prices_file=prices_file(tmp_path), max_cost_usd=0.02)
    with pytest.raises(BudgetExceeded, match="--max-cost"):
        await run("Who wrote to whom?", r3con.documents_from_texts(TEXTS), settings)
    (folder,) = (tmp_path / "runs").iterdir()
    error = json.loads((folder / "error.json").read_text())
    assert error["error"].startswith("BudgetExceeded")
    usage = json.loads((folder / "usage.json").read_text())
    assert 0 < usage["cost_usd"] <= 0.02
    stages = {c["stage"] for c in fake_server.calls()}
    assert "reason" not in stages, "nothing after the stop was called"


def test_the_cli_prints_one_line_when_the_cap_is_reached(fake_server, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for title, text in TEXTS:
        (docs / f"{title}.txt").write_text(text)
    result = r3con_cli("run", "Who wrote to whom?", str(docs), "--base-url", fake_server.base_url, "--no-cache",
                       "--prices", str(prices_file(tmp_path)), "--max-cost", "0.02", "--out", str(tmp_path / "runs"),
                       "-q", timeout=120)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--max-cost $0.0200" in lines[0] and "rerun the same command" in lines[0]


async def test_runs_opened_inside_sharing_spend_against_one_cap_which_settings_do_not_carry(fake_server, tmp_path):
    from r3con.llm import build_llm
    from r3con.llm.layers.budget import sharing

    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, api_key="x", cache=False,
                                      prices_file=prices_file(tmp_path), max_cost_usd=1.0)
    assert "cost_cap" not in settings.public()
    cap = CostCap(1.0)
    with sharing(cap):
        async with build_llm(settings) as one, build_llm(settings) as two:
            assert one.cost_cap is cap and two.cost_cap is cap
            await one.complete(ChatRequest(messages=(Message("user", "hello"),), stage="reason", max_tokens=50))
            first = cap.spent_usd
            await two.complete(ChatRequest(messages=(Message("user", "hello"),), stage="reason", max_tokens=50))
    assert 0 < first < cap.spent_usd, "both runs' calls were charged to the one cap"
    async with build_llm(settings) as alone:  # outside: a cap of its own
        assert alone.cost_cap is not cap and alone.cost_cap is not None


def test_the_call_log_keeps_the_folders_cost_as_it_writes_and_reads_earlier_attempts_once(tmp_path, monkeypatch):
    path = tmp_path / "calls.jsonl"
    path.write_text(json.dumps({"stage": "relevance", "usage": {"cost_usd": 0.003}}) + "\n")  # an earlier attempt
    log = CallLog(path)
    assert log.summary().total() == pytest.approx(0.003), "before this attempt writes, the file says it"
    log.write({"stage": "relevance", "usage": {"cost_usd": 0.002}})
    reads = []
    monkeypatch.setattr(LogSummary, "of", classmethod(lambda cls, p: reads.append(p) or cls()))
    log.write({"stage": "populate", "from_cache": True, "usage": {"cost_usd": 0.5}})  # a cache hit: free
    log.write({"stage": "populate", "error": "ProviderError: 500"})
    assert log.summary().total() == pytest.approx(0.005) and reads == [], "kept as written, not read back"
    log.write({"stage": "answer", "usage": {"cost_usd": None, "unpriced": ["m"]}})
    assert log.summary().total() is None, "a call without a known price makes the total unknown"
    log.close()
    monkeypatch.undo()
    assert spent_in(path) == pytest.approx(0.005), "the same as reading the whole log"
    assert CallLog(None).summary().total() == 0.0


def test_a_request_a_pool_of_several_models_may_answer_reserves_at_the_dearest_of_them():
    prices = PriceTable({"scripted": Price(input=1.0, output=2.0), "dear": Price(input=10.0, output=20.0)})
    pooled = BudgetGuard(ScriptedLLM(), CostCap(1.0), prices,
                         models_of=lambda m: ("scripted", "dear") if m == "pool:dear,scripted" else (m,))
    alone = BudgetGuard(ScriptedLLM(), CostCap(1.0), prices)
    dear = replace(request(), model="dear")
    assert pooled.worst_case(replace(request(), model="pool:dear,scripted")) == alone.worst_case(dear)
    assert pooled.worst_case(request()) == alone.worst_case(request()) < alone.worst_case(dear)
