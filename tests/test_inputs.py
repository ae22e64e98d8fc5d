"""The account of a run's inputs: parts and degraded documents added to what loading found."""

import json
import pickle

import pytest

import r3con
from r3con.corpus.documents import Document, split_documents
from r3con.corpus.inputs import DegradedInput, Inputs, ReadInput, ReadInputs, SkippedInput, UnreadableInput
from r3con.pipeline.method import run
from r3con.results import Failure


def test_parts_and_degraded_documents_join_the_account_once():
    docs = (Document(1, "Short", "tiny", source="a.txt"), Document(2, "Long", "Word. " * 3000, source="b.txt"))
    parts = split_documents(docs, 300)
    inputs = Inputs.of(docs).with_parts(parts)
    assert [(r.source, r.parts) for r in inputs.read] == [("a.txt", 1), ("b.txt", len(parts) - 1)]
    failure = Failure(stage="populate", doc="2.1", error="HTTP 500: internal error")
    twice = inputs.with_degraded([failure]).with_degraded([failure])
    assert twice.degraded == (DegradedInput(doc="2.1", stage="populate", cause="HTTP 500: internal error"),)
    assert twice.issues == (("document 2.1", "degraded in populate: HTTP 500: internal error"),)


def test_issues_list_what_a_user_must_hear_about_and_only_that():
    inputs = Inputs(
        read=(ReadInput(1, "a.txt"), ReadInput(2, "b.csv", warning="CSV record at line 3: unterminated quote"),
              ReadInput(3, "c.txt", encoding="cp1252")),
        skipped=(SkippedInput("d.pdf", "no text layer: OCR it first (e.g. ocrmypdf)", "no text layer"),),
        unreadable=(UnreadableInput("e.pdf", "cannot read the PDF: broken"),),
    )
    assert [what for what, _ in inputs.issues] == ["e.pdf", "d.pdf", "b.csv"]
    data = inputs.to_dict()
    assert set(data) == {"read", "skipped", "unreadable", "degraded", "duplicates", "excluded"}
    assert data["read"][2] == {"doc": 3, "source": "c.txt", "parts": 1, "encoding": "cp1252"}



def test_the_files_read_are_held_as_numbers_and_sources_yet_read_as_their_accounts():
    accounts = (ReadInput(41234, "a.txt"), ReadInput(50012, "b.csv", parts=3, warning="CSV record at line 3: bad"),
                ReadInput(67890, "c.txt", encoding="cp1252"))
    read = ReadInputs.of(accounts)
    assert read == accounts and accounts == read and list(read) == list(accounts)
    assert read[-1] == accounts[-1] and read[1:] == accounts[1:] and len(read) == 3
    with pytest.raises(IndexError):
        read[3]
    assert read != accounts[:2] and read != (*accounts[:2], ReadInput(67890, "c.txt"))  # the encoding counts
    assert hash(read) == hash(accounts) and pickle.loads(pickle.dumps(read)) == accounts
    split = read.with_parts({41234: 2, 50012: 1})  # a number it does not list keeps its parts as they were
    assert [r.parts for r in split] == [2, 1, 1] and [r.parts for r in read] == [1, 3, 1]
    assert [r.parts for r in read.with_parts({})] == [1, 3, 1]
    # what loading gives, from the documents' own numbers and sources
    docs = (Document(12345, "A", "one", source="a.txt"), Document(23456, "B", "two " * 900, source="b.txt"))
    inputs = Inputs.of(docs).with_parts(split_documents(docs, 300))
    assert isinstance(inputs.read, ReadInputs) and inputs.read[0] == ReadInput(12345, "a.txt")
    assert inputs.read[1].parts > 1 and inputs.read[1].source is docs[1].source
    with pytest.raises(ValueError, match="2 numbers for 1 sources"):
        ReadInputs([1, 2], ["a.txt"])

async def test_a_library_run_accounts_for_its_inputs_in_the_result_and_the_manifest(fake_server, tmp_path, clean_env):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old. " + "She lives in Oslo. " * 400)
    (tmp_path / "docs" / "b.pptx").write_bytes(b"PK\x03\x04")
    corpus = r3con.load_corpus([tmp_path / "docs"])
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, api_key="x", out_dir=tmp_path / "runs",
                                      part_tokens=1000)
    result = await run("How old is Ann?", corpus.documents, settings, inputs=corpus.inputs)
    (read,) = result.inputs.read
    assert read.parts == len(result.parts) > 1
    assert result.summary()["inputs"]["skipped"][0]["kind"] == "unsupported .pptx"
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["inputs"] == result.summary()["inputs"]  # written an entry at a time, as the summary is
    if result.evidence_stats is not None:
        assert manifest["evidence_stats"] == json.loads(json.dumps(result.evidence_stats.to_dict()))
    plain = await run("How old is Ann?", corpus.documents, settings)  # documents alone: every one counted as read
    assert [r.source for r in plain.inputs.read] == [read.source] and not plain.inputs.skipped
