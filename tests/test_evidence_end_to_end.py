"""Invented passages are caught: a scripted model invents a share of records' passages; every invented one is
flagged and no genuine one is. Then the answer's citations resolve to passages that index the documents."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import r3con
from r3con.pipeline.method import run
from r3con.testing import FakeLLMServer, FaultPlan

from .conftest import cli_in_process

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
FIXTURE_DOCS = [str(p) for p in sorted(FIXTURES.glob("*.txt"))]
QUESTION = "Who sailed on the Demeter, what cargo did it carry, and who holds the company's shares?"


async def _measure(docs, question: str, invent: float, tmp_path: Path, unverified: str = "keep",
                   reword: float = 0.0, seed: int = 3) -> dict:
    """Run over the scripted server inventing `invent` of the passages (and copying `reword` of the others
    carelessly); compare what it invented with the flags."""
    with FakeLLMServer(faults=FaultPlan(invent=invent, reword=reword, seed=seed)) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path,
                                          unverified=unverified)
        result = await run(question, docs, settings)
        calls = [c for c in server.calls() if c["stage"] == "populate" and c.get("status") == 200]
    invented = {(int(c["doc"]), int(c.get("part") or 1), p) for c in calls for p in c.get("invented", [])}
    reworded = {(int(c["doc"]), int(c.get("part") or 1), p) for c in calls for p in c.get("reworded", [])}
    records = [r for rows in result.records.values() for r in rows]
    is_invented = [(r["_doc"], r.get("_part", 1), r["_passage"]) in invented for r in records]
    # a careless copy that replaced a word carrying meaning (a name, a number) differs from its document:
    # flagged as a mismatch that names the word the copy put in, and not counted as a false flag
    changed = [r["_match"] == "mismatch" and (r["_doc"], r.get("_part", 1), r["_passage"]) in reworded
               and all(d["record"] and d["record"] in r["_passage"] and d["document"] not in r["_passage"]
                       for d in r["_mismatch"]) for r in records]
    flagged = [r["_match"] in ("none", "mismatch") for r in records]
    matches = [r["_match"] for r in records if (r["_doc"], r.get("_part", 1), r["_passage"]) in reworded]
    return {"result": result, "records": len(records), "invented": sum(is_invented), "reworded": matches,
            "flagged": sum(flagged), "changed": sum(changed),
            "invented_flagged": sum(i and f for i, f in zip(is_invented, flagged, strict=True)),
            "false_flags": sum(f and not i and not c for i, f, c in zip(is_invented, flagged, changed, strict=True))}


@pytest.mark.parametrize("invent", [0.1, 0.3, 0.5])
async def test_dracula_every_invented_passage_is_flagged_and_no_genuine_one(shared_data, tmp_path, invent):
    question = json.loads((shared_data / "dracula" / "questions.json").read_text())[0]["question"]
    docs = r3con.load_documents([shared_data / "dracula" / "docs"])
    m = await _measure(docs, question, invent, tmp_path, reword=0.3)
    assert m["records"] > 50 and m["invented"] >= invent * m["records"] / 2
    assert m["invented_flagged"] == m["invented"] and m["false_flags"] == 0
    # genuine passages copied carelessly (white space, quotes, case, a word) are found, tolerantly or fuzzily
    assert len(m["reworded"]) >= 10 and "none" not in m["reworded"]
    assert {"tolerant", "fuzzy"} <= set(m["reworded"]) and m["reworded"].count("mismatch") == m["changed"]
    stats = m["result"].evidence_stats
    assert stats.records - stats.verified == m["flagged"] and stats.mismatched == m["changed"]
    assert stats.share == pytest.approx(1 - (m["invented"] + m["changed"]) / m["records"])


async def test_dracula_without_invention_verifies_every_record(shared_data, tmp_path):
    question = json.loads((shared_data / "dracula" / "questions.json").read_text())[0]["question"]
    docs = r3con.load_documents([shared_data / "dracula" / "docs"])
    m = await _measure(docs, question, 0.0, tmp_path, unverified="reask")
    assert m["records"] > 50 and m["flagged"] == 0 and m["result"].evidence_stats.share == 1.0
    assert m["result"].by_stage["populate"].calls == len(m["result"].parts), "nothing to re-ask"


async def test_fixture_corpus_flags_invented_passages_and_reask_repairs_some(tmp_path):
    docs = r3con.load_documents(FIXTURE_DOCS)
    flagged = {"keep": 0, "reask": 0}
    for seed in (3, 4, 5, 6):  # the model invents at random: a re-ask repairs some over several draws
        kept = await _measure(docs, QUESTION, 0.5, tmp_path / f"keep-{seed}", seed=seed)
        assert kept["invented_flagged"] == kept["invented"] and kept["false_flags"] == 0
        reasked = await _measure(docs, QUESTION, 0.5, tmp_path / f"reask-{seed}", unverified="reask", seed=seed)
        assert reasked["result"].evidence_stats.reasked == len(
            {r["_doc"] for rows in kept["result"].records.values() for r in rows if r["_match"] == "none"})
        assert reasked["false_flags"] == 0
        flagged["keep"] += kept["flagged"]
        flagged["reask"] += reasked["flagged"]
    assert flagged["reask"] < flagged["keep"]


async def test_the_answer_cites_records_whose_spans_index_the_documents_of_the_run_folder(tmp_path):
    docs = r3con.load_documents(FIXTURE_DOCS)
    with FakeLLMServer() as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path)
        result = await run(QUESTION, docs, settings)
    assert result.evidence and not result.unknown_citations
    assert all(e.kind == "record" for e in result.evidence)
    texts = {d["doc"]: d["text"] for d in map(json.loads, (result.run_dir / "documents.jsonl").read_text().splitlines())}
    assert set(texts) == {d.number for d in docs}
    by_id = {r["_id"]: r for rows in result.records.values() for r in rows}
    for e in result.evidence:  # the model's own passage, found exactly, is the document's text at the span
        assert e.match == "exact" and e.span is not None
        assert texts[e.doc][e.span[0]:e.span[1]] == by_id[e.id]["_passage"] == e.passage
    summary = json.loads((result.run_dir / "result.json").read_text())
    assert summary["evidence"][0]["id"] == result.evidence[0].id and summary["unknown_citations"] == []
    assert summary["evidence_stats"]["share"] == 1.0
    records = json.loads((result.run_dir / "records.json").read_text())
    ids = [r["_id"] for rows in records.values() for r in rows]
    assert len(ids) == len(set(ids)) and {e.id for e in result.evidence} <= set(ids)


async def test_direct_mode_cites_too(tmp_path):
    docs = r3con.load_documents(FIXTURE_DOCS)
    with FakeLLMServer() as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path,
                                          reasoning="direct")
        result = await run(QUESTION, docs, settings)
    assert result.evidence and "Sources:" not in result.answer
    assert {e.doc for e in result.evidence} <= {d.number for d in docs}


async def test_notes_keep_the_documents_they_name_as_refs(tmp_path):
    texts = [("Ship", "The Demeter carried boxes of earth from Varna to Whitby."),
             ("Port", "At Whitby the Demeter ran aground; boxes of earth were landed."),
             ("Bank", "The bank's revenue rose.")]
    with FakeLLMServer() as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path)
        result = await run("Where did the Demeter carry boxes of earth?", r3con.documents_from_texts(texts), settings)
    notes = json.loads((result.run_dir / "notes" / "round-2.json").read_text())
    by_doc = {n["doc"]: n for n in notes}
    assert by_doc["1"]["refs"] == ["2"] and by_doc["2"]["refs"] == ["1"]
    assert all("Document" in by_doc[k]["note"] for k in ("1", "2"))


def test_cli_prints_the_answer_then_its_evidence(tmp_path):
    with FakeLLMServer(faults=FaultPlan(invent=0.3, seed=1)) as server:
        proc = cli_in_process("run", QUESTION, *FIXTURE_DOCS, "--base-url", server.base_url, "--out", str(tmp_path))
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0] and "Evidence:" in lines
        shown = lines[lines.index("Evidence:") + 1:]
        assert shown and all(line.startswith("  [R") and "(document " in line for line in shown[:3])
        assert "evidence:" in proc.stderr and "records' passages found" in proc.stderr
        as_json = cli_in_process("run", QUESTION, *FIXTURE_DOCS, "--base-url", server.base_url, "--out", str(tmp_path),
                            "--json", "--quiet", "--unverified", "drop")
    data = json.loads(as_json.stdout)
    assert data["evidence"] and {"id", "kind", "doc", "title", "passage", "span", "match"} <= set(data["evidence"][0])
    dropped = data["evidence_stats"]["dropped"]
    assert dropped == data["evidence_stats"]["records"] - data["evidence_stats"]["verified"]
    if dropped:
        assert len(json.loads((Path(data["run_dir"]) / "dropped_records.json").read_text())) == dropped


def test_fake_llm_accepts_invent():
    assert FaultPlan.parse("invent=0.3,seed=2").invent == 0.3
    assert "invent=0.3" in FaultPlan(invent=0.3).spec()


def test_fake_llm_command_invents_and_logs_which(tmp_path):
    log = tmp_path / "calls.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "r3con", "fake-llm", "--port", "0", "--faults",
                             "invent=0.5,reword=0.3,seed=4", "--log", str(log)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().strip().split("=")[1])
        run_ = cli_in_process("run", QUESTION, *FIXTURE_DOCS, "--base-url", f"http://127.0.0.1:{port}/v1", "--json",
                         "--quiet", "--unverified", "keep", "--out", str(tmp_path / "runs"))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
    assert run_.returncode == 0, run_.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    invented = [p for c in calls if c["stage"] == "populate" for p in c.get("invented", [])]
    records = json.loads((Path(json.loads(run_.stdout)["run_dir"]) / "records.json").read_text())
    flagged = [r["_passage"] for rows in records.values() for r in rows if r["_match"] == "none"]
    assert invented and sorted(flagged) == sorted(invented)


async def test_values_the_document_does_not_state_are_flagged_on_their_records(tmp_path):
    """The scripted model gives a share of records a value neither their passage nor their document states;
    exactly those fields are flagged `_ungrounded`, counted, and carried into result.json."""
    docs = r3con.load_documents(FIXTURE_DOCS)
    with FakeLLMServer(faults=FaultPlan(misvalue=0.5, seed=3)) as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, api_key="x", out_dir=tmp_path)
        result = await run(QUESTION, docs, settings)
        calls = [c for c in server.calls() if c["stage"] == "populate" and c.get("status") == 200]
    given = {(int(c["doc"]), table, position, field) for c in calls for table, position, field in c.get("misvalued", [])}
    assert given, "the scripted model changed some values"
    flagged = set()
    for table, rows in result.records.items():
        for r in rows:
            for field in r.get("_ungrounded", []):
                flagged.add((r["_doc"], table, int(r["_id"].split(".")[-1]), field))
    assert flagged == given
    stats = result.evidence_stats
    assert stats.ungrounded == len(given) and stats.ungrounded_values == len(given)
    saved = json.loads((result.run_dir / "records.json").read_text())
    assert sum(bool(r.get("_ungrounded")) for rows in saved.values() for r in rows) == len(given)
    summary = json.loads((result.run_dir / "result.json").read_text())
    assert summary["evidence_stats"]["ungrounded"] == len(given) and "unsupported_numbers" in summary
    cited = {e.id: e for e in result.evidence}
    for rows in result.records.values():
        for r in rows:
            if r["_id"] in cited:
                assert list(cited[r["_id"]].ungrounded) == r.get("_ungrounded", [])
