"""Runs against the scripted server in fault-injecting modes finish with the answer of a fault-free run."""

import json
from collections import Counter

import pytest

import r3con
from r3con.demo import corpus_dir, question
from r3con.errors import RunFailed
from r3con.llm.json_reply import extract_json
from r3con.testing import Behaviour, FakeLLMServer, FaultPlan
from r3con.testing._faults import KINDS, break_json

from .conftest import cli_in_process

# Faults fall by a hash of each request, so a change to the prompts moves them: the seed is one under
# which this corpus meets every kind at least twice (seeds 1, 2, 4 and 6-11 meet each at least once)
EVERY_FAULT = ("429=0.1,500=0.1,hang=0.05,drop=0.1,truncate=0.1,malformed=0.2,empty=0.1,reasoning=0.1,"
               "hang_s=1.5,seed=1")


def test_fault_specs_parse_and_faults_per_request_are_bounded():
    plan = FaultPlan.parse(EVERY_FAULT + ",max=3,only=populate+schema")
    assert plan.rate_hang == 0.05 and plan.max_faults_per_request == 3 and plan.hang_s == 1.5
    assert FaultPlan.parse(plan.spec()) == plan
    always = FaultPlan.parse("500=1.0,max=2")
    assert [always.decide("h", n) for n in range(4)] == ["500", "500", None, None]
    assert plan.decide("h", 0, stage="relevance") is None  # only the listed stages get faults
    for bad in ("teapot=0.1", "500=lots", "500=0.7,429=0.7"):
        with pytest.raises(ValueError):
            FaultPlan.parse(bad)


@pytest.mark.parametrize("text", [
    '{"people": [{"name": "Ann", "age": 34}, {"name": "Bob", "age": null}]}',
    '```json\n{"people": [{"name": "Ann", "note": "a, b}"}]}\n```',
])
def test_broken_json_is_recovered_to_the_same_value(text):
    value, _ = extract_json(text)
    for request_hash in ("00000000", "00000001", "00000002"):  # the three ways of breaking it
        broken = break_json(text, request_hash)
        assert broken is not None and broken != text
        assert extract_json(broken)[0] == value
    assert break_json("a plain note", "00000000") is None


def _run(server, tmp_path, name, on_end=None, **kw):
    settings = r3con.Settings.resolve(env={}, base_url=server.base_url, out_dir=tmp_path / name, cache=False,
                                      request_timeout_s=0.5, retry_base_s=0.01, **kw)
    import asyncio

    return asyncio.run(r3con.run(question(), r3con.load_documents([corpus_dir()]), settings, on_end=on_end))


def test_a_run_through_every_fault_gives_the_answer_and_records_of_a_fault_free_run(tmp_path):
    """Every fault but a cut reply, which is kept for what it completed (the next test)."""
    with FakeLLMServer() as server:
        clean = _run(server, tmp_path, "clean")
    with FakeLLMServer(faults=FaultPlan.parse(EVERY_FAULT.replace("truncate=0.1", "truncate=0"))) as server:
        faulty = _run(server, tmp_path, "faulty")
        seen = Counter(c["fault"] for c in server.calls())
    assert set(KINDS) - {"truncate"} <= set(seen), seen  # every other kind of fault happened at least once
    assert faulty.answer == clean.answer
    assert faulty.records == clean.records and faulty.notes == clean.notes and faulty.schema == clean.schema
    assert faulty.degraded == ()
    for name in ("records.json", "answer.txt", "schema.json", "notes/round-2.json"):
        assert (faulty.run_dir / name).read_text() == (clean.run_dir / name).read_text()
    events = faulty.usage.events
    assert events["retries"] >= seen["429"] + seen["500"] + seen["hang"] + seen["drop"]
    assert events["empty"] == seen["empty"]
    assert events["reasoning_only"] == seen["reasoning"]
    assert clean.usage.events.get("retries", 0) == 0
    usage = json.loads((faulty.run_dir / "usage.json").read_text())
    assert usage["events"]["retries"] == events["retries"]


def test_cut_replies_are_kept_for_what_they_completed_or_asked_once_more(tmp_path):
    with FakeLLMServer(behaviour=Behaviour(note_sentences=8)) as server:
        clean = _run(server, tmp_path, "clean", rounds=1)
    with FakeLLMServer(faults=FaultPlan.parse("truncate=1.0,max=1,only=relevance"), behaviour=Behaviour(note_sentences=8)) as server:
        result = _run(server, tmp_path, "cut", rounds=1)
        cut = [c for c in server.calls() if c["fault"] == "truncate"]
    assert result.degraded == () and result.answer
    events = result.usage.events
    assert events["length"] == len(cut) == len(result.parts), "every note was cut once, none asked with more"
    kept = {doc: note for doc, note in result.notes[0].items() if note.endswith(" (cut)")}
    assert len(kept) == events["cut_kept"] >= 1
    for doc, note in result.notes[0].items():  # a kept note is the start of the whole one, to a sentence's end
        if doc in kept:
            assert clean.notes[0][doc].startswith(note.removesuffix(" (cut)")) and note[-7] in ".!?"
        else:  # nothing complete in the cut half: asked once more, as it was
            assert note == clean.notes[0][doc]


def test_documents_that_fail_for_good_are_degraded_and_the_run_goes_on(tmp_path):
    with FakeLLMServer(faults=FaultPlan.parse("500=1.0,max=1000,only=populate")) as server:
        result = _run(server, tmp_path, "run", retries=1, max_failed_share=1.0)
    assert result.answer and result.records and all(len(rows) == 0 for rows in result.records.values())
    assert {f.stage for f in result.degraded} == {"populate"}
    assert sorted(f.doc for f in result.degraded) == sorted(str(d.number) for d in r3con.load_documents([corpus_dir()]))
    assert "HTTP 500" in result.degraded[0].error and "giving up" in result.degraded[0].error
    saved = json.loads((result.run_dir / "result.json").read_text())
    assert len(saved["degraded"]) == 6
    transcript = json.loads((result.run_dir / "transcript.json").read_text())
    assert transcript["steps"]  # the agent ran, and was told (see test_pipeline) which documents are missing


def test_a_failed_schema_proposal_fails_the_run(tmp_path):
    with FakeLLMServer(faults=FaultPlan.parse("500=1.0,max=1000,only=schema")) as server:
        ends: list[r3con.RunEnd] = []
        with pytest.raises(r3con.ProviderError, match="HTTP 500") as failed:  # the endpoint's error, as it was
            _run(server, tmp_path, "run", on_end=ends.append, retries=1)
    [end] = ends
    assert failed.value.status == 500 and end.error is failed.value and end.stage == "schema"
    with FakeLLMServer(faults=FaultPlan.parse("500=1.0,max=1000,only=populate")) as server:
        with pytest.raises(RunFailed, match="all 6 documents failed in populate: HTTP 500 from the endpoint: internal error"):
            _run(server, tmp_path, "run2", retries=0)


def test_the_cli_finishes_against_a_faulty_server_and_shows_the_events(tmp_path):
    with FakeLLMServer(faults=FaultPlan.parse(EVERY_FAULT.replace("hang=0.05,", ""))) as server:
        proc = cli_in_process("run", question(), str(corpus_dir()), "--base-url", server.base_url, "--json",
                         "--out", str(tmp_path / "runs"), "--no-cache", env={"R3CON_RETRY_BASE_S": "0.01"})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["degraded"] == []
    assert data["usage"]["events"]["retries"] > 0 and data["usage"]["events"]["empty"] > 0
    (line,) = [line for line in proc.stderr.replace("\n  ", " ").splitlines() if line.startswith("usage:")]
    assert "retries" in line and "empty" in line  # the end-of-run usage line names the events


def test_an_endpoint_without_constrained_decoding_is_asked_without_it_once_it_refuses(tmp_path):
    with FakeLLMServer() as server:
        clean = _run(server, tmp_path, "clean")
    with FakeLLMServer(faults=FaultPlan.parse("json_schema=0")) as server:
        result = _run(server, tmp_path, "plain")
        refused = [c for c in server.calls() if c["status"] == 400]
    # only the calls already in flight when the first was refused asked with json_schema
    assert 1 <= len(refused) <= 6 and {c["stage"] for c in refused} == {"populate"}
    assert result.records == clean.records and result.answer == clean.answer and result.degraded == ()
    assert result.usage.events["constrained_fallback"] == len(refused)
