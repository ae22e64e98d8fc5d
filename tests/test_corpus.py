import random

import pytest

from r3con.corpus import (
    Document,
    collect_paths,
    documents_from_texts,
    load_documents,
    split_documents,
    split_text,
)
from r3con.errors import InputError
from r3con.tokens import estimate_tokens


def test_split_keeps_every_character_once_and_respects_the_budget():
    rng = random.Random(3)
    words = ["alpha", "beta", "gamma", "delta.", "epsilon!", "zeta?", "\n\n", "eta,", "\n", "宇宙", "theta"]
    for _ in range(30):
        text = " ".join(rng.choice(words) for _w in range(rng.randint(50, 3000)))
        budget = rng.randint(20, 400)
        pieces = split_text(text, budget)
        assert "".join(pieces) == text
        assert all(estimate_tokens(p) <= budget for p in pieces)
        assert all(p for p in pieces)


def test_split_prefers_paragraph_then_sentence_boundaries():
    para = "First sentence here. Second sentence here.\n\n"
    pieces = split_text(para * 40, 60)
    assert all(p.endswith("\n\n") for p in pieces[:-1])
    long_para = "One sentence follows another sentence. " * 200
    pieces = split_text(long_para, 50)
    assert all(p.endswith(". ") for p in pieces[:-1])


def test_split_cuts_inside_a_word_only_when_there_is_no_space():
    text = "x" * 5000
    pieces = split_text(text, 100)
    assert "".join(pieces) == text and len(pieces) > 1


def test_split_documents_numbers_parts_stably():
    docs = (Document(1, "Short", "tiny"), Document(2, "Long", "Word. " * 3000), Document(3, "Also short", "ok"))
    parts = split_documents(docs, 300)
    assert [p.key for p in parts][:2] == ["1", "2.1"]
    long_parts = [p for p in parts if p.number == 2]
    assert [p.part for p in long_parts] == list(range(1, len(long_parts) + 1))
    assert all(p.parts == len(long_parts) for p in long_parts)
    assert "".join(p.text for p in long_parts) == docs[1].text
    assert parts[-1].key == "3" and long_parts[0].label.startswith("Document 2, part 1 of")


def test_loading_a_folder_reads_supported_files_in_order(tmp_path):
    (tmp_path / "b.md").write_text("# Beta heading\n\nbody b")
    (tmp_path / "a.txt").write_text("Title line\n\nbody a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.csv").write_text("name,age\nAnn,4\n")
    (tmp_path / "sub" / "d.html").write_text("<html><head><title>Page D</title><script>x=1</script></head><body><p>Hello</p><p>World</p></body></html>")
    (tmp_path / "e.json").write_text('{"k": [1, 2]}')
    (tmp_path / "skip.bin").write_bytes(b"\x00\x01")
    (tmp_path / "empty.txt").write_text("   ")
    docs = load_documents([tmp_path])
    assert [(d.number, d.title) for d in docs] == [
        (1, "Title line"), (2, "Beta heading"), (3, "e"), (4, "c"), (5, "Page D"),
    ]
    assert "Ann | 4" in docs[3].text
    assert "Hello" in docs[4].text and "World" in docs[4].text and "x=1" not in docs[4].text


def test_globs_and_duplicates(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    paths = collect_paths([str(tmp_path / "*.txt"), tmp_path / "a.txt"])
    assert [p.name for p in paths] == ["a.txt", "b.txt"]


def test_missing_path_and_empty_corpus_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such file or folder"):
        load_documents([tmp_path / "nope"])
    with pytest.raises(InputError, match="no file matches"):
        load_documents([str(tmp_path / "*.md")])
    (tmp_path / "x.bin").write_bytes(b"\x00")
    with pytest.raises(InputError, match="no readable document"):
        load_documents([tmp_path])


def _minimal_pdf(text: str) -> bytes:
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_pdf_text_is_extracted_and_a_broken_pdf_is_an_input_error(tmp_path):
    (tmp_path / "report.pdf").write_bytes(_minimal_pdf("Quarterly revenue rose"))
    (doc,) = load_documents([tmp_path / "report.pdf"])
    assert "Quarterly revenue rose" in doc.text and doc.title == "report"
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 garbage")
    with pytest.raises(InputError, match="cannot read PDF"):
        load_documents([tmp_path / "broken.pdf"])


def test_token_estimate_counts_cjk_characters_as_tokens():
    assert estimate_tokens("") == 0
    assert estimate_tokens("宇宙" * 100) > estimate_tokens("ab" * 100) * 3


def test_parts_know_where_they_start_in_their_document():
    text = ("Ann Lee is 34. " * 40 + "\n\n") * 30
    parts = split_documents(documents_from_texts([("Long", text)]), 500)
    assert len(parts) > 2
    for part in parts:
        assert text[part.offset:part.offset + len(part.text)] == part.text
    assert [p.offset for p in parts] == sorted({p.offset for p in parts})
