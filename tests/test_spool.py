"""corpus.spool: a run's document texts on disk, read back the same whenever asked for."""

import gc
import json
import os
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

import r3con
from r3con.corpus.documents import Document, documents_from_texts, split_documents, spool
from r3con.corpus.spool import TextSpool
from r3con.errors import ConfigError
from r3con.testing import FakeLLMServer

TEXTS = ["Ann Lee is 34 and lives in Oslo.\n\nShe works at the harbour.", "Ünïcödé ✓ 中文 and a lone \udcff surrogate", ""]


def test_a_spooled_text_reads_back_the_same_and_the_document_holds_no_copy():
    docs = [Document(number=i, title=f"T{i}", text=t) for i, t in enumerate(TEXTS, start=1)]
    before = [(d.text, d.tokens, d.sha256, d.chars) for d in docs]
    copies = [replace(d) for d in docs]
    spool(docs, TextSpool())
    assert all(d.spooled for d in docs) and not any(isinstance(v, str) and v in TEXTS[:2] for d in docs
                                                      for v in d.__dict__.values())
    assert [(d.text, d.tokens, d.sha256, d.chars) for d in docs] == before
    assert docs == copies, "equal to the same document holding its text"
    with pytest.raises(AttributeError):
        docs[0].text = "changed"  # still frozen


def test_spooling_again_leaves_a_spooled_document_and_a_copy_or_a_pickle_holds_the_text():
    doc = Document(number=7, title="T", text=TEXTS[1])
    first = TextSpool()
    spool([doc], first)
    held = doc.__dict__["_text"]
    spool([doc], TextSpool())
    assert doc.__dict__["_text"] is held
    again = pickle.loads(pickle.dumps(doc))  # another process gets the text, not a reference into this one's file
    assert not again.spooled and again.text == TEXTS[1] and again == doc
    renumbered = replace(doc, number=8)
    assert not renumbered.spooled and renumbered.text == TEXTS[1]


def test_the_spool_file_is_unlinked_and_goes_with_the_last_document_that_points_into_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    doc = Document(number=1, title="T", text="x" * 10_000)
    texts = TextSpool()
    fd = texts._fd
    spool([doc], texts)
    assert list(tmp_path.iterdir()) == [], "no name on disk: nothing is left behind by a killed run"
    assert os.fstat(fd).st_size == 10_000
    del texts
    gc.collect()
    os.fstat(fd)  # the document still points into it
    del doc
    gc.collect()
    with pytest.raises(OSError):
        os.fstat(fd)


def test_an_unwritable_tmpdir_is_a_one_line_error_that_says_what_to_do(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="TMPDIR"):
        TextSpool()


async def test_a_run_keeps_its_documents_and_parts_texts_on_disk_and_answers_as_before(tmp_path):
    long = "\n\n".join(f"Paragraph {i}: Ann Lee met Bob Stone in Oslo on day {i} of the voyage." for i in range(200))
    docs = documents_from_texts([("Log", long), ("Note", TEXTS[0])])
    with FakeLLMServer() as server:
        settings = r3con.Settings.resolve(env={}, base_url=server.base_url, out_dir=tmp_path, temperature=0,
                                          part_tokens=400, max_steps=2)
        result = await r3con.run("Who met in Oslo?", docs, settings)
    assert len(result.parts) > len(result.documents), "the long document was split"
    assert all(d.spooled for d in (*result.documents, *result.parts))
    assert [p.text for p in result.parts if p.number == docs[0].number] == [
        p.text for p in split_documents(docs[:1], 400)]
    lines = (Path(result.run_dir) / "documents.jsonl").read_text().splitlines()
    assert [json.loads(line)["text"] for line in lines] == [long, TEXTS[0]], "the run folder has the texts"
