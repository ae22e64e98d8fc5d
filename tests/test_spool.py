"""corpus.spool: a run's document texts on disk, read back the same whenever asked for."""

import gc
import json
import os
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

import r3con
from r3con.corpus.documents import _TEXT, Document, documents_from_texts, split_documents, spool
from r3con.corpus.spool import TextSpool
from r3con.errors import ConfigError
from r3con.testing import FakeLLMServer

TEXTS = ["Ann Lee is 34 and lives in Oslo.\n\nShe works at the harbour.", "Ünïcödé ✓ 中文 and a lone \udcff surrogate", ""]


def test_a_spooled_text_reads_back_the_same_and_the_document_holds_no_copy():
    docs = [Document(number=i, title=f"T{i}", text=t) for i, t in enumerate(TEXTS, start=1)]
    before = [(d.text, d.tokens, d.sha256, d.chars) for d in docs]
    copies = [replace(d) for d in docs]
    spool(docs, TextSpool())
    held = [_TEXT.held(d) for d in docs] + [getattr(d, n) for d in docs for n in Document.__slots__ if n != "text"]
    assert all(d.spooled for d in docs) and not any(isinstance(v, str) and v in TEXTS[:2] for v in held)
    assert [(d.text, d.tokens, d.sha256, d.chars) for d in docs] == before
    assert docs == copies, "equal to the same document holding its text"
    with pytest.raises(AttributeError):
        docs[0].text = "changed"  # still frozen


def test_spooling_again_leaves_a_spooled_document_and_a_copy_or_a_pickle_holds_the_text():
    doc = Document(number=7, title="T", text=TEXTS[1])
    first = TextSpool()
    spool([doc], first)
    held = _TEXT.held(doc)
    spool([doc], TextSpool())
    assert _TEXT.held(doc) is held
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


def test_a_document_holds_its_fields_in_slots_and_counts_its_text_once():
    import tracemalloc

    from r3con.corpus.documents import text_sha256, with_tokens
    from r3con.tokens import estimate_tokens

    doc = Document(number=7, title="T", text=TEXTS[1])
    assert not hasattr(doc, "__dict__")  # 300 B a document less than an attributes' dict
    assert (doc.tokens, doc.sha256) == (estimate_tokens(TEXTS[1]), text_sha256(TEXTS[1]))
    assert with_tokens(Document(number=8, title="T", text=TEXTS[1]), 5).tokens == 5  # as the corpus store knew it
    assert replace(with_tokens(doc, 5), number=9).tokens == estimate_tokens(TEXTS[1])  # a copy counts its own
    spool_ = TextSpool()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        docs = [Document(number=10_000 + i, title="Record", text=TEXTS[0], source="a.txt") for i in range(5_000)]
        spool(docs, spool_)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # the document (112 B), where its text is (64 B and two ints), its hash (113 B); an attributes' dict was 300 B more
    assert held < 5_000 * 450, f"{held:,} B for 5,000 spooled documents"


def test_a_spooled_texts_place_and_length_survive_packing_at_any_size():
    from r3con.corpus.spool import SpooledText

    class Asked:  # a spool that says where it was asked to read
        def read(self, at: int, size: int) -> str:
            return f"{at}:{size}"

    for at, size, chars in [(0, 0, 0), (7, 650, 600), (2**45 + 3, 2**39, 2**39 - 1), (2**62, 2**40 - 1, 5)]:
        text = SpooledText(Asked(), at, size, chars)  # type: ignore[arg-type]
        assert (text.read(), text.chars) == (f"{at}:{size}", chars)
    with pytest.raises(ValueError, match="more than a spooled text holds"):
        SpooledText(Asked(), 0, 2**40, 1)  # type: ignore[arg-type]
