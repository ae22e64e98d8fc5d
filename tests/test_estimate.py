import json

import r3con
from r3con.pipeline.estimate import Assumptions, estimate_range, estimate_run, sample
from r3con.pipeline.method import run
from r3con.testing import Behaviour, DrawnRelevance, FakeLLMServer, FaultPlan

from .conftest import cli_in_process

TASK = "Which ships sailed from Varna, and who wrote about them?"
SENTENCE = ("Mina wrote to Lucy about the ship {i}, which sailed from Varna with boxes of earth and a silent crew. "
            "The weather in Whitby was grey for days. ")


def texts(n: int) -> list[tuple[str, str]]:
    return [(f"Diary {i}", SENTENCE.format(i=i) * (10 + 3 * i)) for i in range(1, n + 1)]


async def test_the_estimate_is_within_a_factor_of_two_of_a_real_run(fake_server, tmp_path):
    docs = r3con.documents_from_texts(texts(8))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"r3con-scripted": {"input": 1.0, "output": 2.0}}))
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, api_key="x", out_dir=tmp_path,
                                      cache=False, prices_file=prices, model="r3con-scripted")
    predicted = await estimate_run(TASK, docs, settings, assumptions=Assumptions(agent_steps=2))
    result = await run(TASK, docs, settings)
    stages = {s.stage: s for s in predicted.stages}
    for stage in ("relevance", "populate"):
        actual = result.by_stage[stage]
        assert stages[stage].calls == actual.calls
        assert 0.5 <= stages[stage].input_tokens / actual.prompt_tokens <= 2.0, stage
        assert 0.5 <= stages[stage].cached_tokens / actual.cached_tokens <= 2.0, stage
    ratio = predicted.total.input_tokens / result.usage.prompt_tokens
    assert 0.5 <= ratio <= 2.0
    assert predicted.total.cost_usd is not None and 0.33 <= predicted.total.cost_usd / result.usage.cost_usd <= 3.0


async def test_selective_notes_and_the_paper_layout_change_the_estimate():
    docs = r3con.documents_from_texts(texts(60))

    def settings(**kw):
        return r3con.Settings.resolve(env={}, model="gpt-4o-mini", **kw)

    cache = await estimate_run(TASK, docs, settings(notes_budget_tokens=1000))
    paper = await estimate_run(TASK, docs, settings(notes_budget_tokens=1000, layout="paper"))
    everything = await estimate_run(TASK, docs, settings(notes_budget_tokens=0))
    assert cache.total.input_tokens == paper.total.input_tokens
    relevance = {e.stage: e for e in cache.stages}["relevance"], {e.stage: e for e in paper.stages}["relevance"]
    assert relevance[0].cached_tokens > 1.5 * relevance[1].cached_tokens
    assert cache.total.input_tokens < everything.total.input_tokens / 2
    assert any("at most 1,000 tokens" in line for line in cache.assumptions)
    assert any("all notes in full" in line for line in everything.assumptions)
    assert cache.total.cost_usd is not None and 0 < cache.total.cost_usd < everything.total.cost_usd


def test_the_estimate_command_needs_no_endpoint(tmp_path):
    for title, text in texts(3):
        (tmp_path / f"{title}.txt").write_text(text)
    result = cli_in_process("estimate", TASK, str(tmp_path), "--model", "gpt-4o-mini", "--json", timeout=60)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [s["stage"] for s in data["stages"]] == ["relevance", "schema", "populate", "reason"]
    assert data["stages"][0]["calls"] == 6 and data["total"]["cost_usd"] > 0
    assert any("token counts: estimate" in line for line in data["assumptions"])
    table = cli_in_process("estimate", TASK, str(tmp_path), "--model", "unknown-model", timeout=60)
    assert table.returncode == 0 and "Assumptions" in table.stdout
    assert "unknown" in table.stdout.split("Assumptions")[0] and "0.0000" not in table.stdout, "never $0 for no price"
    unpriced = json.loads(cli_in_process("estimate", TASK, str(tmp_path), "--model", "unknown-model", "--json").stdout)
    assert unpriced["total"]["cost_usd"] is None


async def test_a_sampled_estimate_agrees_with_the_run_it_predicts(fake_server, tmp_path):
    docs = r3con.documents_from_texts(texts(12))
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, api_key="x", out_dir=tmp_path,
                                      cache=False, max_steps=2)
    assumed = await estimate_run(TASK, docs, settings, assumptions=Assumptions(agent_steps=2))
    calibrated, window = await sample(TASK, docs, settings, 4, base=Assumptions(agent_steps=2))
    assert calibrated.sampled == 4 and window >= 2048
    predicted = await estimate_run(TASK, docs, settings, assumptions=calibrated)
    result = await run(TASK, docs, settings)
    assert abs(predicted.total.calls / result.usage.calls - 1) <= 0.10
    error = abs(predicted.total.input_tokens / result.usage.prompt_tokens - 1)
    assert error <= 0.15 and error < abs(assumed.total.input_tokens / result.usage.prompt_tokens - 1)
    assert any("measured on 4 sampled documents" in line for line in predicted.assumptions)
    assert any(line.startswith("sampling made ") for line in predicted.assumptions)


def test_sampling_needs_an_endpoint(tmp_path):
    (tmp_path / "a.txt").write_text(texts(1)[0][1])
    result = cli_in_process("estimate", TASK, str(tmp_path), "--sample", "4", timeout=60)
    assert result.returncode != 0 and "--base-url" in result.stderr and "Traceback" not in result.stderr


async def test_the_sampled_share_of_relevant_documents_is_not_counted_in_steps_of_one_sample(fake_server, tmp_path):
    # 6 of 16 documents are about the question: four samples alone could only say 25% or 50%
    other = "The recipe calls for flour, butter and sugar, stirred and baked slowly in a warm oven. "
    docs = r3con.documents_from_texts(texts(6) + [(f"Recipe {i}", other * (8 + i)) for i in range(10)])
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, api_key="x", out_dir=tmp_path,
                                      cache=False, max_steps=2)
    calibrated, _ = await sample(TASK, docs, settings, 4)
    result = await run(TASK, docs, settings)
    actual = sum(1 for note in result.notes[0].values() if note) / len(result.parts)
    assert 0.25 < actual < 0.5
    assert abs(calibrated.relevant_share - actual) < 0.06
    assert calibrated.probes > calibrated.sampled == 4


def test_a_sampled_estimate_can_count_with_the_endpoints_tokenizer(fake_server, tmp_path):
    for i in range(3):
        (tmp_path / f"d{i}.txt").write_text(f"Ann Lee, aged {30 + i}, wrote letter {i} to the council.")
    result = cli_in_process("estimate", TASK, str(tmp_path), "--sample", "2", "--tokenize", "--json",
                            "--base-url", fake_server.base_url, "--model", "r3con-scripted", timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["stages"][0]["calls"] == 6 and any("/tokenize" in line for line in data["assumptions"])
    span = data["range"]
    assert span["confidence"] == 0.9 and span["draws"] > 100 and "--sample 4 would narrow" in span["narrower"]
    for figure, total in (("calls", data["total"]["calls"]), ("prompt_tokens", data["total"]["input_tokens"])):
        assert span[figure]["low"] <= span[figure]["expected"] == total <= span[figure]["high"]
    assert span["calls"]["high"] > span["calls"]["low"], "the agent's steps and the re-asks were not sampled"


def test_the_estimate_prints_its_range_and_what_would_narrow_it(fake_server, tmp_path):
    for title, text in texts(4):
        (tmp_path / f"{title}.txt").write_text(text)
    common = ("estimate", TASK, str(tmp_path), "--base-url", fake_server.base_url, "--model", "r3con-scripted")
    table = cli_in_process(*common, "--sample", "2", "--confidence", "0.8", timeout=120)
    assert table.returncode == 0, table.stderr
    assert "80% range: calls " in table.stdout and "--sample 4 would narrow the prompt tokens" in table.stdout
    assumed = cli_in_process(*common, timeout=60)
    assert "range from the priors: calls " in assumed.stdout and "--sample N" in assumed.stdout
    assert "priors (the range, with no sample)" in assumed.stdout
    wrong = cli_in_process(*common, "--sample", "2", "--confidence", "1.5", timeout=60)
    assert wrong.returncode == 2 and "--confidence must be between" in wrong.stderr and "Traceback" not in wrong.stderr


async def test_the_range_holds_a_run_whose_relevance_bm25_does_not_predict(tmp_path):
    # relevance drawn against the BM25 ranking the estimator probes along: the last third of it
    other = "The recipe calls for flour, butter and sugar, stirred and baked slowly in a warm oven. "
    docs = r3con.documents_from_texts(texts(10) + [(f"Recipe {i}", other * (8 + i)) for i in range(20)])
    ranked = [str(d.number) for d in sorted(docs, key=lambda d: d.title.startswith("Recipe"))]
    drawn = DrawnRelevance(frozenset(ranked[-9:]), seed=4)
    with FakeLLMServer(behaviour=Behaviour(relevance=drawn)) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path,
                                          cache=False, max_steps=3)
        calibrated, _ = await sample(TASK, docs, settings, 4)
        predicted = await estimate_range(TASK, docs, settings, calibrated)
        result = await run(TASK, docs, settings)
    assert predicted.range is not None and sum(1 for n in result.notes[0].values() if n) == 9
    assert predicted.range.calls.low <= result.usage.calls <= predicted.range.calls.high
    assert predicted.range.prompt_tokens.low <= result.usage.prompt_tokens <= predicted.range.prompt_tokens.high


async def test_a_sample_whose_schema_fails_goes_on_as_the_run_does(tmp_path):
    docs = r3con.documents_from_texts(texts(6))
    with FakeLLMServer(faults=FaultPlan.parse("empty=1.0,max=100,only=schema")) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path,
                                          cache=False, max_steps=2)
        calibrated, _ = await sample(TASK, docs, settings, 2)
        result = await run(TASK, docs, settings)
    assert [f["stage"] for f in result.fallbacks] == ["schema"] and "populate" not in result.by_stage
    assert calibrated.sampled == 2 and calibrated.relevant_share > 0, "the sample measured the notes all the same"
    assert calibrated.schema_tokens < Assumptions().schema_tokens, "the failed attempts' replies were measured"
    predicted = await estimate_run(TASK, docs, settings, assumptions=calibrated)
    assert calibrated.schema_failed, "the sample saw the schema fail"
    stages = {s.stage: s.calls for s in predicted.stages}
    assert "populate" not in stages, "no population, as the run goes on without records"
    assert stages["schema"] == result.by_stage["schema"].calls and stages["reason"] == result.by_stage["reason"].calls
    assert stages["relevance"] == result.by_stage["relevance"].calls
    schema = next(s for s in predicted.stages if s.stage == "schema")
    assert schema.output_tokens <= result.by_stage["schema"].completion_tokens + schema.calls, \
        "empty attempts predicted as empty, not as a 600-token schema each"


async def test_a_sample_that_sees_empty_replies_counts_their_reasks_and_its_range_holds_the_run(tmp_path):
    docs = r3con.documents_from_texts(texts(16))
    faults = FaultPlan.parse("empty=0.2,only=relevance,seed=3")
    with FakeLLMServer(faults=faults) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path,
                                          cache=False, max_steps=2)
        calibrated, _ = await sample(TASK, docs, settings, 4)
        predicted = await estimate_range(TASK, docs, settings, calibrated)
        result = await run(TASK, docs, settings)
    run_calls = result.by_stage["relevance"].calls
    assert run_calls > 2 * len(docs), "the run asked again after empty replies"
    assert calibrated.relevance_calls > 1 and calibrated.relevance_requests >= 4
    planned = {s.stage: s.calls for s in predicted.stages}["relevance"]
    assert abs(planned - run_calls) <= 0.15 * run_calls
    assert predicted.range is not None and predicted.range.calls.low <= result.usage.calls <= predicted.range.calls.high


async def test_an_unsampled_estimate_states_a_range_from_its_priors_and_the_run_falls_inside(fake_server, tmp_path):
    docs = r3con.documents_from_texts(texts(8))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"r3con-scripted": {"input": 0.15, "output": 0.6, "cached_input": 0.075}}))
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, api_key="x", out_dir=tmp_path,
                                      cache=False, prices_file=prices, model="r3con-scripted", max_steps=3)
    predicted = await estimate_run(TASK, docs, settings)
    span = predicted.range
    assert span is not None and span.basis == "priors"
    assert any(line.startswith("priors (the range, with no sample)") for line in predicted.assumptions)
    result = await run(TASK, docs, settings)
    actual = result.usage
    for interval, got, expected in ((span.calls, actual.calls, predicted.total.calls),
                                    (span.prompt_tokens, actual.prompt_tokens, predicted.total.input_tokens),
                                    (span.completion_tokens, actual.completion_tokens, predicted.total.output_tokens),
                                    (span.cost_usd, actual.cost_usd, predicted.total.cost_usd)):
        assert interval is not None and interval.low <= expected <= interval.high
        assert interval.low <= got <= interval.high, (interval, got)
        assert interval.low < interval.high
    point = await estimate_run(TASK, docs, settings, ranged=False)
    assert point.range is None and point.total == predicted.total, "the range adds to the point, never moves it"


def test_the_estimate_counts_with_the_endpoints_tokenizer_unless_told_not_to(fake_server, tmp_path):
    for title, text in texts(3):
        (tmp_path / f"{title}.txt").write_text(text)
    common = ("estimate", TASK, str(tmp_path), "--base-url", fake_server.base_url, "--json")
    counted = json.loads(cli_in_process(*common, timeout=60).stdout)
    assert any(line == f"token counts: {fake_server.base_url.removesuffix('/v1')}/tokenize"
               for line in counted["assumptions"]), counted["assumptions"]
    assert counted["range"]["basis"] == "priors" and counted["range"]["completion_tokens"]["high"] > 0
    local = json.loads(cli_in_process(*common, "--no-tokenize", timeout=60).stdout)
    assert any(line.startswith("token counts: estimate") for line in local["assumptions"])
