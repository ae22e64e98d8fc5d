"""The whole pipeline through real HTTP against the scripted server, and its run folder."""

import asyncio
import json

import pytest

import r3con
from r3con.errors import RunFailed
from r3con.pipeline.method import run
from r3con.testing import Behaviour, FakeLLMServer

from .fakes import SIMPLE_SCHEMA, ScriptedLLM, document_number, quote, schema_reply, stack

TASK = "Which people are named in the documents, and how old are they?"
TEXTS = [
    ("Registry", "Ann Lee is 34 years old. She lives in Oslo."),
    ("Letter", "Bob Stone, aged 41, wrote to Ann Lee about the harbour."),
    ("Weather", "It rained all week in the valley."),
]


async def test_end_to_end_over_http_writes_every_artifact(fake_server, tmp_path, clean_env):
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, api_key="x", out_dir=tmp_path)
    result = await run(TASK, r3con.documents_from_texts(TEXTS), settings)
    ids = {row["_id"] for rows in result.records.values() for row in rows}
    assert result.answer.strip()
    assert result.evidence and all(e.kind == "record" and e.id in ids for e in result.evidence), \
        "the answer cites records the run holds"
    assert repr(result).startswith("RunResult(answer=") and "documents=3" in repr(result)
    assert len(repr(result)) < 400, "a summary, not the corpus"
    assert len(result.notes) == 2 and set(result.notes[-1]) == {"1", "2", "3"}
    assert result.schema is not None and result.records
    assert all(r["_doc"] in (1, 2, 3) for rows in result.records.values() for r in rows)
    folder = result.run_dir
    for name in ("manifest.json", "notes/round-1.json", "notes/round-2.json", "schema.json", "schema_attempts.json",
                 "records.json", "transcript.json", "calls.jsonl", "usage.json", "result.json", "answer.txt"):
        assert (folder / name).is_file(), name
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [d["title"] for d in manifest["documents"]] == ["Registry", "Letter", "Weather"]
    assert manifest["settings"]["api_key"] == "***"
    assert manifest["setting_roles"].keys() == manifest["settings"].keys()  # each setting with its role
    assert (manifest["setting_roles"]["model"], manifest["setting_roles"]["concurrency"]) == ("request", "operational")
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    stages = [c["stage"] for c in calls]
    assert stages.count("relevance") == 6 and stages.count("populate") == 3 and "schema" in stages
    assert "reason" in stages
    assert all(c["usage"]["prompt_tokens"] > 0 for c in calls)
    # the server saw the stage and document headers on every call
    seen = fake_server.calls()
    assert {c["stage"] for c in seen if c.get("path", "").endswith("/chat/completions")} >= {"relevance", "schema", "populate", "reason"}
    assert sorted(c["doc"] for c in seen if c["stage"] == "populate") in (["1", "2", "3"], [1, 2, 3])
    usage = json.loads((folder / "usage.json").read_text())
    assert usage["calls"] == len(calls) and set(usage["by_stage"]) == {"relevance", "schema", "populate", "reason"}
    assert (folder / "answer.txt").read_text().strip() == result.answer.strip()
    transcript = json.loads((folder / "transcript.json").read_text())
    assert transcript["steps"] and all(step["code"] for step in transcript["steps"])
    assert "final_answer(" in transcript["steps"][-1]["code"], "the loop ends at the step that calls final_answer"
    assert len(transcript["steps"]) == stages.count("reason"), "one call a step, each step recorded"
    assert result.summary()["usage"]["by_stage"]["relevance"]["calls"] == 6


async def test_direct_mode_and_no_structuring(fake_server, tmp_path):
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, out_dir=tmp_path,
                                      reasoning="direct", structuring=False, rounds=1, log_calls="full")
    result = await run(TASK, r3con.documents_from_texts(TEXTS), settings)
    assert result.schema is None and not result.records
    calls = [json.loads(line) for line in (result.run_dir / "calls.jsonl").read_text().splitlines()]
    (direct,) = [c for c in calls if c["stage"] == "reason"]
    prompt = "\n".join(m["content"] for m in direct["request"]["messages"])
    notes = result.notes[-1]
    assert any(notes.values()) and not all(notes.values()), "some documents have notes, some not"
    for key, note in notes.items():  # the answer rests on the notes that hold evidence, and only on them
        assert (note in prompt) if note else (f'document="{key}"' not in prompt), key
    assert result.answer.strip() and result.answer.strip() in direct["response"]["content"], "the reply's answer"
    assert set(result.by_stage) == {"relevance", "reason"}
    assert result.by_stage["reason"].calls == 1


@pytest.mark.parametrize(("rounds", "populate_order"), [(2, [1, 2, 3]), (1, [3, 2, 1])])
async def test_each_stage_sends_its_calls_the_other_way_from_the_stage_before(tmp_path, rounds, populate_order):
    llm = ScriptedLLM({"relevance": lambda r: "note", "schema": lambda r: schema_reply(SIMPLE_SCHEMA),
                       "populate": lambda r: json.dumps({"people": [{"name": f"p{document_number(r)}", "_passage": quote(r)}]}),
                       "reason": lambda r: "```python\nfinal_answer(len(people))\n```"})
    settings = r3con.Settings.resolve(env={}, out_dir=tmp_path, rounds=rounds)
    result = await run(TASK, r3con.documents_from_texts(TEXTS), settings, llm=stack(llm))
    last_round = [r.doc for r in llm.calls("relevance") if r.round == rounds]
    assert last_round == ([1, 2, 3] if rounds == 1 else [3, 2, 1])
    assert [r.doc for r in llm.calls("populate")] == populate_order
    assert [row["name"] for row in result.records["people"]] == ["p1", "p2", "p3"]  # records stay in corpus order


async def test_too_many_failed_documents_fail_the_run_and_keep_what_was_done(tmp_path):
    def populate(request):
        if document_number(request) != 1:
            return "not json at all"
        return json.dumps({"people": [{"name": "Ann"}]})

    llm = ScriptedLLM({"relevance": lambda r: "note", "schema": lambda r: schema_reply(SIMPLE_SCHEMA), "populate": populate})
    settings = r3con.Settings.resolve(env={}, out_dir=tmp_path, populate_attempts=1, max_failed_share=0.5)
    ends: list[r3con.RunEnd] = []
    with pytest.raises(RunFailed, match="2 of 3 documents failed in populate") as failed:
        await run(TASK, r3con.documents_from_texts(TEXTS), settings, llm=stack(llm), on_end=ends.append)
    (folder,) = tmp_path.iterdir()
    assert json.loads((folder / "error.json").read_text())["stage"] == "populate"
    assert (folder / "notes" / "round-2.json").is_file() and (folder / "schema.json").is_file()
    assert ends == [r3con.RunEnd(failed.value, folder, "populate", folder / "report.html")], \
        "the error raised as it was, and beside it where the run left off"
    assert not set(vars(failed.value)) & {"run_dir", "stage", "report", "report_error"}


class HangsInSchema(ScriptedLLM):
    async def complete(self, request):
        if request.stage == "schema":
            await asyncio.Event().wait()
        return await super().complete(request)


async def test_a_cancelled_run_stays_cancelled_for_asyncio_and_says_where_it_left_off(tmp_path):
    llm = HangsInSchema({"relevance": lambda r: "note"})
    settings = r3con.Settings.resolve(env={}, out_dir=tmp_path)
    ends: list[r3con.RunEnd] = []
    with pytest.raises(TimeoutError):  # asyncio.timeout turns only the CancelledError it sent into TimeoutError
        async with asyncio.timeout(0.5):
            await run(TASK, r3con.documents_from_texts(TEXTS), settings, llm=stack(llm), on_end=ends.append)
    (folder,) = tmp_path.iterdir()
    [end] = ends
    assert type(end.error) is asyncio.CancelledError and end.run_dir == folder and end.stage == "schema"
    assert json.loads((folder / "error.json").read_text())["kind"] == "interrupted"
    assert end.report == folder / "report.html" and end.report.is_file()


async def test_degraded_documents_are_reported_and_shown_to_the_agent(tmp_path):
    def populate(request):
        return "garbage" if document_number(request) == 3 else json.dumps({"people": [{"name": "Ann"}]})

    seen = {}

    def reason(request):
        seen.setdefault("first", request.messages[1].content)
        return "```python\nfinal_answer(len(people))\n```"

    llm = ScriptedLLM({"relevance": lambda r: "note", "schema": lambda r: schema_reply(), "populate": populate,
                       "reason": reason})
    settings = r3con.Settings.resolve(env={}, out_dir=tmp_path, populate_attempts=1)
    result = await run(TASK, r3con.documents_from_texts(TEXTS), settings, llm=stack(llm))
    assert result.answer == "2"
    assert [f.to_dict()["doc"] for f in result.degraded] == ["3"]
    assert "Document 3" in seen["first"] and "could not be processed" in seen["first"]
    assert result.summary()["degraded"][0]["stage"] == "populate"


async def test_long_documents_are_split_into_parts_that_are_read_separately(tmp_path):
    text = ("Ann Lee is 34. " * 40 + "\n\n") * 30
    llm = ScriptedLLM({"relevance": lambda r: f"part {r.part}", "schema": lambda r: schema_reply(),
                       "populate": lambda r: json.dumps({"people": [{"name": f"p{r.part}", "_passage": quote(r)}]}),
                       "reason": lambda r: "```python\nfinal_answer(sorted({p['_part'] for p in people}))\n```"})
    settings = r3con.Settings.resolve(env={}, out_dir=tmp_path, part_tokens=1000, rounds=1)
    result = await run(TASK, r3con.documents_from_texts([("Long", text)]), settings, llm=stack(llm))
    n = len(result.parts)
    assert n > 1 and "".join(p.text for p in result.parts) == text
    assert result.answer == json.dumps(list(range(1, n + 1)))
    assert sorted(r.part for r in llm.calls("populate")) == list(range(1, n + 1))


def _long_documents(n: int = 10) -> list[tuple[str, str]]:
    """`n` documents, each much longer than the notes, schema and task the population calls share."""
    return [(f"Ledger {i}", " ".join(f"Clerk{i} {w} recorded {j} crates of tin at dock {i}."
                                     for j, w in enumerate(["Ann", "Bob", "Cy", "Dee"] * 40))) for i in range(n)]


@pytest.mark.parametrize(("cache_blocks", "cold"), [(40, True), (200_000, False)])
async def test_calls_put_the_shared_part_first_when_the_endpoint_did_not_keep_the_documents(
        tmp_path, cache_blocks, cold):
    # 40 blocks of 64 characters hold the system message but never a whole document
    with FakeLLMServer(behaviour=Behaviour(cache_blocks=cache_blocks)) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, out_dir=tmp_path, concurrency=2,
                                          reasoning="direct")
        result = await run("Who recorded crates of tin, and how many?", r3con.documents_from_texts(_long_documents()),
                           settings)
        populate = [c for c in server.calls() if c["stage"] == "populate"]
    layout = json.loads((result.run_dir / "manifest.json").read_text())["layout"]
    reuse = layout["document_reuse"]
    assert reuse["endpoint_reports_cached_tokens"] and reuse["population_shared_first"] is cold
    # round 2's first calls (probes) keep their document first and find it cached in the large cache only;
    # where the cache lost the documents, the rest of the round puts the shared notes first
    (round2,) = reuse["rounds"]
    assert 0 < round2["probes"] < 10 and round2["kept"] == (0 if cold else round2["probes"])
    relevance_shared_first = layout["shared_first_calls"].get("relevance", 0)
    assert relevance_shared_first == (10 - round2["probes"] if cold else 0)
    assert layout["shared_first_calls"].get("populate", 0) == (10 if cold else 0)
    if cold:  # the shared task, schema and notes now lead, so every population call after the first reuses them
        assert sum(c["cached_tokens"] > 200 for c in populate) >= 8  # two run at once: both may miss


async def test_a_rerun_places_every_call_as_the_first_run_did_and_asks_nothing_again(tmp_path):
    with FakeLLMServer(behaviour=Behaviour(cache_blocks=40)) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, out_dir=tmp_path / "runs", concurrency=2,
                                          reasoning="direct", cache=True, cache_path=tmp_path / "llm.sqlite")
        docs = r3con.documents_from_texts(_long_documents())
        first = await run("Who recorded crates of tin, and how many?", docs, settings)
        asked = len(server.calls())
        again = await run("Who recorded crates of tin, and how many?", docs, settings)
        assert len(server.calls()) == asked, "every call of the rerun came from the response cache"
    layouts = [json.loads((r.run_dir / "manifest.json").read_text())["layout"] for r in (first, again)]
    assert layouts[0]["document_reuse"]["population_shared_first"] is True
    assert layouts[0]["document_reuse"] == layouts[1]["document_reuse"]
    assert layouts[0]["shared_first_calls"] == layouts[1]["shared_first_calls"]


async def test_a_window_the_server_states_is_learned_and_the_parts_planned_again(tmp_path):
    # configured for 16,384 tokens, the server takes 4,096: parts planned for 16k do not fit, and the server says so
    with FakeLLMServer(max_model_len=4096) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, out_dir=tmp_path, concurrency=2,
                                          reasoning="direct", context_window=16_384, cache=False)
        docs = r3con.documents_from_texts([(title, f"{text} {text}") for title, text in _long_documents(3)])
        result = await run("Who recorded crates of tin, and how many?", docs, settings)
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["endpoint"]["learned_window"]["window"] == 4096
    assert manifest["part_tokens"] == 1280 and all(d["parts"] > 1 for d in manifest["documents"])
    assert result.degraded == () and len(result.parts) > 3
    assert {p.number for p in result.parts} == {1, 2, 3}


async def test_a_too_long_reply_without_a_number_halves_the_parts_until_they_fit(tmp_path):
    # Ollama's words: no window, no size. The parts are halved and planned again until they fit; none is lost
    with FakeLLMServer(max_model_len=4096,
                       behaviour=Behaviour(overflow_message="input length exceeds the context length")) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, out_dir=tmp_path, concurrency=2,
                                          reasoning="direct", context_window=16_384, cache=False)
        docs = r3con.documents_from_texts([(title, f"{text} {text}") for title, text in _long_documents(3)])
        result = await run("Who recorded crates of tin, and how many?", docs, settings)
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    learned = manifest["endpoint"]["learned_window"]
    assert 2048 <= learned["window"] < 4096 and all(step.get("halved") for step in learned["learned_from"])
    assert result.degraded == () and all(d["parts"] > 1 for d in manifest["documents"])
    assert {p.number for p in result.parts} == {1, 2, 3}
