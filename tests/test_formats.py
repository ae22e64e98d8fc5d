"""Office, mail and e-book documents (_formats.py), each made by its own format's tooling; a PDF's junk
title falls back to the file name; `run --help` names every suffix."""

from __future__ import annotations

import io
import sys
from email.message import EmailMessage

import pytest
from pypdf import PdfReader, PdfWriter

from r3con import load_corpus, load_documents
from r3con.corpus.readers import SUPPORTED_SUFFIXES, usable_title

from .conftest import cli_in_process
from .test_corpus import _minimal_pdf


def test_docx_paragraphs_and_tables_in_order_with_its_title(tmp_path):
    import docx

    document = docx.Document()
    document.core_properties.title = "Supplier audit 2025"
    document.add_heading("Findings", level=1)
    document.add_paragraph("Halvard Industries passed the audit.")
    table = document.add_table(rows=2, cols=2)
    for (r, c), value in {(0, 0): "Supplier", (0, 1): "Score", (1, 0): "Nordic Steel", (1, 1): "87"}.items():
        table.cell(r, c).text = value
    document.add_paragraph("Signed by the auditor.")
    document.save(tmp_path / "audit.docx")
    (doc,) = load_documents([tmp_path / "audit.docx"])
    assert doc.title == "Supplier audit 2025"
    assert doc.text == ("Findings\n\nHalvard Industries passed the audit.\n\nSupplier | Score\nNordic Steel | 87"
                        "\n\nSigned by the auditor.")


def test_docx_without_a_title_property_takes_its_first_heading(tmp_path):
    import docx

    document = docx.Document()
    document.add_heading("Minutes of the board", level=1)
    document.add_paragraph("The board met.")
    document.save(tmp_path / "m.docx")
    assert load_documents([tmp_path / "m.docx"])[0].title == "Minutes of the board"


def test_xlsx_each_sheet_as_csv_text(tmp_path):
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Suppliers"
    sheet.append(["Name", "City", "Score"])
    sheet.append(["Nordic Steel", "Oslo, Norway", 87])
    sheet.append(["Baltic Parts", None, 91.5])
    other = book.create_sheet("Empty")
    other["A1"] = None
    book.create_sheet("Notes").append(["checked in March"])
    book.save(tmp_path / "suppliers.xlsx")
    (doc,) = load_documents([tmp_path / "suppliers.xlsx"])
    assert doc.title == "suppliers"
    assert doc.text == ('# Sheet: Suppliers\nName,City,Score\nNordic Steel,"Oslo, Norway",87\nBaltic Parts,,91.5'
                        "\n\n# Sheet: Notes\nchecked in March")


def test_eml_headers_body_and_attachments_listed(tmp_path):
    message = EmailMessage()
    message["From"] = "Ann Lee <ann@example.com>"
    message["To"] = "bob@example.com"
    message["Subject"] = "Delivery delayed"
    message["Date"] = "Tue, 04 Mar 2025 10:00:00 +0100"
    message.set_content("The steel delivery is two weeks late.\n")
    message.add_alternative("<p>The <b>steel</b> delivery is two weeks late.</p>", subtype="html")
    message.add_attachment(b"%PDF-1.4 invoice", maintype="application", subtype="pdf", filename="invoice.pdf")
    (tmp_path / "mail.eml").write_bytes(bytes(message))
    (doc,) = load_documents([tmp_path / "mail.eml"])
    assert doc.title == "Delivery delayed"
    assert "From: Ann Lee <ann@example.com>\nTo: bob@example.com" in doc.text
    assert "The steel delivery is two weeks late." in doc.text and "<b>" not in doc.text
    assert "Attachments (not read):\n- invoice.pdf (application/pdf, 16 bytes)" in doc.text


def test_an_html_only_eml_is_read_as_text(tmp_path):
    message = EmailMessage()
    message["Subject"] = "Offer"
    message.set_content("<html><body><p>Price: 12 EUR</p><script>x()</script></body></html>", subtype="html")
    (tmp_path / "offer.eml").write_bytes(bytes(message))
    (doc,) = load_documents([tmp_path / "offer.eml"])
    assert "Price: 12 EUR" in doc.text and "x()" not in doc.text


def test_epub_chapters_in_reading_order(tmp_path):
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("r3con-test")
    book.set_title("The Harbour Ledger")
    book.set_language("en")
    one = epub.EpubHtml(title="One", file_name="one.xhtml", lang="en")
    one.content = "<h1>Chapter one</h1><p>The ship arrived in May.</p>"
    two = epub.EpubHtml(title="Two", file_name="two.xhtml", lang="en")
    two.content = "<h1>Chapter two</h1><p>It left in June.</p>"
    for chapter in (one, two):
        book.add_item(chapter)
    book.toc = (one, two)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = [two, one]  # the spine, not the file order, is the reading order
    epub.write_epub(str(tmp_path / "ledger.epub"), book)
    (doc,) = load_documents([tmp_path / "ledger.epub"])
    assert doc.title == "The Harbour Ledger"
    assert doc.text.index("It left in June.") < doc.text.index("The ship arrived in May.")


def test_a_damaged_file_or_a_missing_library_is_listed_unreadable_with_the_fix(tmp_path, monkeypatch):
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not a zip")
    (tmp_path / "ok.txt").write_text("Some text.")
    corpus = load_corpus([tmp_path])
    (bad,) = corpus.inputs.unreadable
    assert bad.source.endswith("broken.docx") and "cannot read the .docx file" in bad.reason
    monkeypatch.setitem(sys.modules, "openpyxl", None)
    (tmp_path / "sheet.xlsx").write_bytes(b"whatever")
    corpus = load_corpus([tmp_path])
    assert any(u.source.endswith("sheet.xlsx") and "pip install 'r3con[office]'" in u.reason
               for u in corpus.inputs.unreadable)


@pytest.mark.parametrize(("title", "expected"), [
    ("pdfsrc.html", "report"), ("", "report"), ("   ", "report"), (None, "report"),
    ("Microsoft Word - draft3.doc", "report"), ("Untitled", "report"),
    ("Annual Report 2024", "Annual Report 2024"), ("Q3 results: p.s. revised", "Q3 results: p.s. revised"),
])
def test_a_pdf_title_falls_back_to_the_file_name_when_empty_or_junk(tmp_path, title, expected):
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_minimal_pdf("Revenue rose"))))
    if title is not None:
        writer.add_metadata({"/Title": title})
    with (tmp_path / "report.pdf").open("wb") as fh:
        writer.write(fh)
    assert load_documents([tmp_path / "report.pdf"])[0].title == expected
    assert usable_title(title, tmp_path / "report.pdf") == expected


def test_run_help_names_every_suffix_read():
    proc = cli_in_process("run", "--help", env={"COLUMNS": "200"})
    text = " ".join(proc.stdout.split())
    assert all(suffix in text for suffix in SUPPORTED_SUFFIXES), sorted(s for s in SUPPORTED_SUFFIXES if s not in text)
