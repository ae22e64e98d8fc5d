import io
import os
import random
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from r3con.corpus.documents import (
    Document,
    document_numbers,
    documents_from_texts,
    load_corpus,
    load_documents,
    split_documents,
    split_text,
)
from r3con.errors import InputError
from r3con.tokens import estimate_tokens

from .bad_inputs import LATIN, assert_every_file_accounted, blank_pdf, docx_bytes, messy_folder


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
    assert [d.title for d in docs] == ["Title line", "Beta heading", "e", "c", "Page D"]
    assert len({d.number for d in docs}) == 5
    assert "Ann | 4" in docs[3].text
    assert "Hello" in docs[4].text and "World" in docs[4].text and "x=1" not in docs[4].text


def test_globs_and_duplicates(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    corpus = load_corpus([str(tmp_path / "*.txt"), tmp_path / "a.txt"])
    assert [Path(d.source).name for d in corpus.documents] == ["a.txt", "b.txt"]


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
    with pytest.raises(InputError, match="broken.pdf: cannot read the PDF"):
        load_documents([tmp_path / "broken.pdf"])


def test_token_estimate_counts_cjk_characters_as_tokens():
    assert estimate_tokens("") == 0
    assert estimate_tokens("宇宙" * 100) > estimate_tokens("ab" * 100) * 3


def test_a_messy_folder_accounts_for_every_file_in_exactly_one_category(tmp_path):
    root = tmp_path / "docs"
    expected = messy_folder(root)
    corpus = load_corpus([root])
    inputs = corpus.inputs.to_dict()
    assert_every_file_accounted(inputs, root, expected)
    assert [Path(d.source).name for d in corpus.documents] == [
        "events.jsonl", "latin.txt", "letter.md", "notes.txt", "people.csv"]
    assert [r["doc"] for r in inputs["read"]] == [d.number for d in corpus.documents]
    reasons = {Path(s["source"]).name: s["reason"] for s in inputs["skipped"] + inputs["unreadable"]}
    assert reasons["scan.pdf"] == "no text layer: OCR it first (e.g. ocrmypdf)"
    assert reasons["empty.txt"].startswith("empty") and reasons["blank.md"].startswith("empty")
    assert reasons["blob.txt"].startswith("binary")
    assert reasons["slides.pptx"].startswith("unsupported .pptx") and ".pdf" in reasons["slides.pptx"]
    assert reasons["broken.pdf"].startswith("cannot read the PDF:") and "which does not exist" in reasons["gone.txt"]
    assert inputs["duplicates"] == [{"source": str(root / "saved" / "notes.txt"), "same_as": str(root / "notes.txt")}]
    rules = {Path(e["source"]).name: e["rule"] for e in inputs["excluded"]}
    assert rules == {".git": "version control", ".venv": "virtualenv", "env": "virtualenv",
                     "node_modules": "dependencies", "old-run": "r3con runs", "r3con-runs": "r3con runs",
                     ".env.txt": "hidden"}
    assert not any("sk-secret" in d.text or "earlier answer" in d.text for d in corpus.documents)


def test_text_that_is_not_utf8_is_decoded_and_the_encoding_said(tmp_path):
    (tmp_path / "latin.txt").write_bytes(LATIN.encode("latin-1"))
    (tmp_path / "utf16.txt").write_text("Ærlig talt, sa Åse.", encoding="utf-16")
    (tmp_path / "utf8.txt").write_text("Grüße aus Köln", encoding="utf-8")
    corpus = load_corpus([tmp_path])
    texts = {Path(d.source).name: d.text for d in corpus.documents}
    assert texts["latin.txt"] == LATIN and texts["utf16.txt"] == "Ærlig talt, sa Åse."
    encodings = {Path(r.source).name: r.encoding for r in corpus.inputs.read}
    assert encodings == {"latin.txt": "cp1252", "utf16.txt": "utf-16", "utf8.txt": None}


def test_a_csv_with_an_unterminated_quote_is_read_verbatim_with_its_line(tmp_path):
    rows = 'name,age\nAnn,34\nBob,41\n"Cid Park,29\nDee,52\n'
    (tmp_path / "people.csv").write_text(rows)
    (tmp_path / "good.csv").write_text('name,note\nAnn,"two\nlines"\nBob,ok\n')
    corpus = load_corpus([tmp_path])
    bad = next(d for d in corpus.documents if d.title == "people")
    assert bad.text == rows  # every row, none merged into a quoted field
    read = {Path(r.source).name: r.warning for r in corpus.inputs.read}
    assert read["people.csv"] == "CSV record at line 4: unterminated quote; read as plain text"
    assert read["good.csv"] is None
    assert next(d for d in corpus.documents if d.title == "good").text == "name | note\nAnn | two\nlines\nBob | ok"


def test_jsonl_bad_lines_are_kept_and_numbered_as_in_the_file(tmp_path):
    # U+2028 inside a JSON string is valid JSON; str.splitlines would cut the record there and misnumber
    lines = ['{"a": 1}', '{"s": "x\u2028y"}', "", '{"b": oops}', '{"c": 3}', "not json"]
    (tmp_path / "log.jsonl").write_text("\n".join(lines) + "\n")
    corpus = load_corpus([tmp_path])
    (doc,) = corpus.documents
    (read,) = corpus.inputs.read
    assert read.warning is not None and read.warning.startswith("lines 4, 6 not valid JSON")
    assert '{"b": oops}' in doc.text and "not json" in doc.text and '"c": 3' in doc.text and "x\u2028y" in doc.text
    (tmp_path / "log.jsonl").unlink()
    (tmp_path / "one.json").write_text('{"k": [1,\n 2,,]}')
    (read,) = load_corpus([tmp_path]).inputs.read
    assert read.warning is not None and "at line 2" in read.warning


def test_identical_documents_are_read_once(tmp_path):
    for name in ("a.txt", "b.txt", "c.md"):
        (tmp_path / name).write_text("Same words in every file.")
    (tmp_path / "d.txt").write_text("Other words.")
    corpus = load_corpus([tmp_path])
    assert [Path(d.source).name for d in corpus.documents] == ["a.txt", "d.txt"]
    assert [(Path(d.source).name, Path(d.same_as).name) for d in corpus.inputs.duplicates] == [
        ("b.txt", "a.txt"), ("c.md", "a.txt")]


def test_explicit_hidden_files_are_read_and_exclude_globs_apply_everywhere(tmp_path):
    (tmp_path / ".env.txt").write_text("KEY=1")
    (tmp_path / "keep.txt").write_text("keep")
    (tmp_path / "draft.log.txt").write_text("draft")
    (tmp_path / "drafts").mkdir()
    (tmp_path / "drafts" / "x.txt").write_text("x")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "c.txt").write_text("commit")
    assert [d.title for d in load_corpus([tmp_path / ".env.txt"]).documents] == [".env"]
    corpus = load_corpus([tmp_path], exclude=["drafts", "*.log.txt"], include_hidden=True)
    assert sorted(Path(d.source).name for d in corpus.documents) == [".env.txt", "keep.txt"]
    assert {Path(e.source).name: e.rule for e in corpus.inputs.excluded} == {
        "drafts": "--exclude drafts", "draft.log.txt": "--exclude *.log.txt", ".git": "version control"}
    named = load_corpus([tmp_path / "keep.txt", tmp_path / "draft.log.txt"], exclude=["*.log.txt"])
    assert [d.title for d in named.documents] == ["keep"] and len(named.inputs.excluded) == 1


def test_globs_leave_out_what_folder_walks_leave_out(tmp_path):
    (tmp_path / "node_modules" / "p").mkdir(parents=True)
    (tmp_path / "node_modules" / "p" / "r.md").write_text("dep")
    (tmp_path / "a.md").write_text("a")
    (tmp_path / ".hidden.md").write_text("h")
    corpus = load_corpus([str(tmp_path / "**" / "*.md")])
    assert [Path(d.source).name for d in corpus.documents] == ["a.md"]
    assert sorted(e.rule for e in corpus.inputs.excluded) == ["dependencies", "hidden"]


def test_a_run_folder_under_any_name_is_not_read_but_one_named_explicitly_is_a_folder_of_files(tmp_path):
    run = tmp_path / "docs" / "my-runs" / "2026-q"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text('{"task": "q", "r3con_version": "0.1.0"}')
    (run / "answer.txt").write_text("earlier answer")
    (tmp_path / "docs" / "a.txt").write_text("a")
    corpus = load_corpus([tmp_path / "docs"])
    assert [d.title for d in corpus.documents] == ["a"]
    assert [(Path(e.source).name, e.rule) for e in corpus.inputs.excluded] == [("2026-q", "r3con runs")]


def test_a_mostly_scanned_pdf_is_read_with_a_warning(tmp_path):
    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(_minimal_pdf("Cover page"))))
    for _ in range(3):
        writer.add_blank_page(width=612, height=792)
    with (tmp_path / "scan.pdf").open("wb") as f:
        writer.write(f)
    corpus = load_corpus([tmp_path])
    assert "Cover page" in corpus.documents[0].text
    assert corpus.inputs.read[0].warning == "3 of 4 pages have no text layer: OCR it first (e.g. ocrmypdf)"


def test_when_nothing_is_readable_the_error_says_why(tmp_path):
    (tmp_path / "scan.pdf").write_bytes(blank_pdf())
    (tmp_path / "a.pptx").write_bytes(docx_bytes())
    (tmp_path / ".notes.txt").write_text("hidden")
    with pytest.raises(InputError) as info:
        load_corpus([tmp_path])
    message = str(info.value)
    assert "no readable document" in message and "OCR it first" in message and "unsupported .pptx" in message
    assert "1 excluded" in message and "--include-hidden" in message and "\n" not in message


def test_a_folder_that_cannot_be_listed_is_unreadable_not_dropped(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "b.txt").write_text("b")
    real = os.scandir

    def scandir(path="."):  # what a folder without read permission does (the tests may run as root)
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    corpus = load_corpus([tmp_path])
    assert [d.title for d in corpus.documents] == ["a"]
    (entry,) = corpus.inputs.unreadable
    assert entry.source == str(tmp_path / "locked")
    assert entry.reason == "cannot list the folder: Permission denied; check its permissions"


def test_a_link_to_a_folder_is_counted_not_followed(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.txt").write_text("b")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("a")
    (tmp_path / "docs" / "more").symlink_to(tmp_path / "elsewhere")
    corpus = load_corpus([tmp_path / "docs"])
    assert [d.title for d in corpus.documents] == ["a"]
    assert [(Path(e.source).name, e.rule) for e in corpus.inputs.excluded] == [("more", "link to a folder")]
    assert [d.title for d in load_corpus([tmp_path / "docs" / "more"]).documents] == ["b"]  # named: read


def test_parts_know_where_they_start_in_their_document():
    text = ("Ann Lee is 34. " * 40 + "\n\n") * 30
    parts = split_documents(documents_from_texts([("Long", text)]), 500)
    assert len(parts) > 2
    for part in parts:
        assert text[part.offset:part.offset + len(part.text)] == part.text
    assert [p.offset for p in parts] == sorted({p.offset for p in parts})


def test_a_document_keeps_its_number_when_files_are_added_removed_or_renamed_around_it(tmp_path):
    first, later = tmp_path / "one" / "corpus", tmp_path / "two" / "corpus"
    for folder in (first, later):
        (folder / "sub").mkdir(parents=True)
    for name in ("b.txt", "d.txt", "sub/f.txt"):
        (first / name).write_text(f"text of {name}")
        (later / name).write_text(f"text of {name}")
    (first / "z.txt").write_text("deleted later")
    (later / "a.txt").write_text("added before all")
    (later / "c.txt").write_text("added between")
    (later / "e.txt").write_text("text of z.txt, renamed")
    before = {Path(d.source).relative_to(first).as_posix(): d.number for d in load_documents([first])}
    after = {Path(d.source).relative_to(later).as_posix(): d.number for d in load_documents([later])}
    assert {name: after[name] for name in ("b.txt", "d.txt", "sub/f.txt")} == {
        name: before[name] for name in ("b.txt", "d.txt", "sub/f.txt")}
    assert len(set(after.values())) == len(after)  # every document has its own


def test_numbers_are_a_function_of_the_names_and_taken_numbers_go_to_the_next_candidate():
    names = [f"report-{i}.txt" for i in range(3000)]
    numbers = document_numbers(names)
    assert len(set(numbers)) == len(names) and all(n >= 10_000 for n in numbers)
    assert document_numbers(list(reversed(names))) == list(reversed(numbers))
    base = document_numbers(names[:2000])
    grown = document_numbers(names[:2000] + [f"new-{i}.txt" for i in range(200)])
    moved = sum(a != b for a, b in zip(base, grown[:2000], strict=True))
    assert moved <= 10  # a new name takes an existing number only when it hashes onto it first
    same = documents_from_texts([("Same title", "one"), ("Same title", "two")], stable=True)
    assert same[0].number != same[1].number


def test_texts_in_memory_keep_their_numbers_when_asked_to_and_are_numbered_in_order_otherwise():
    texts = [(f"Letter {i}", f"text {i}") for i in range(8)]
    before = {d.title: d.number for d in documents_from_texts(texts, stable=True)}
    after = {d.title: d.number for d in documents_from_texts([("Added", "new")] + texts[::-1][1:], stable=True)}
    assert all(after[title] == before[title] for title in after if title in before)
    assert [d.number for d in documents_from_texts(texts)] == list(range(1, 9))


def test_a_document_re_split_for_a_smaller_window_leaves_the_other_documents_parts(tmp_path):
    (tmp_path / "long.txt").write_text("\n\n".join(f"Paragraph {i} of the long letter, with words." for i in range(200)))
    for name in ("a.txt", "z.txt"):
        (tmp_path / name).write_text(f"A short note in {name}.")
    docs = load_documents([tmp_path])
    before, after = split_documents(docs, 2000), split_documents(docs, 500)
    long = next(d.number for d in docs if d.source.endswith("long.txt"))
    assert [p.key for p in before if p.number != long] == [p.key for p in after if p.number != long]
    assert len([p for p in after if p.number == long]) > len([p for p in before if p.number == long])


def test_equal_names_are_numbered_alike_by_their_texts_digests_or_their_hex():
    import hashlib

    names = ["a.txt", "b.txt", "a.txt", "a.txt", "c.txt", "b.txt"]
    digests = [hashlib.sha256(f"text {i}".encode()).digest() for i in range(len(names))]
    numbers = document_numbers(names, digests)  # what a load passes: the digests its documents hold
    assert numbers == document_numbers(names, [d.hex() for d in digests])  # what texts in memory pass
    assert len(set(numbers)) == len(names)
