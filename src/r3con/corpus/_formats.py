"""Readers for office and mail formats: .docx (python-docx), .xlsx (openpyxl), .eml (the standard
library's email), .epub (EbookLib). The first, second and fourth need `pip install 'r3con[office]'`;
a file of a kind whose library is missing is listed as unreadable with that hint, never dropped.

Each returns (title, text, warning); the title is the document's own (its metadata, a subject) when
it has a usable one, else the caller's fallback.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any, cast

from ..errors import InputError

OFFICE_SUFFIXES = frozenset({".docx", ".xlsx", ".eml", ".epub"})
_NEEDS = {".docx": ("docx", "python-docx"), ".xlsx": ("openpyxl", "openpyxl"), ".epub": ("ebooklib", "EbookLib")}

Parsed = tuple[str | None, str, str | None]  # (title or None, text, warning or None)


def read_office(suffix: str, raw: bytes, html_text: Callable[[str], tuple[str, str]]) -> Parsed:
    """The title (None: none of its own), text and warning of an office, mail or e-book file of kind
    `suffix` whose bytes are `raw` (read by the caller, who refuses pipes and devices).

    `html_text` turns HTML into (title, text): an e-mail's HTML body and an e-book's chapters use it.
    """
    module, package = _NEEDS.get(suffix, ("", ""))
    if module:
        try:
            __import__(module)
        except ImportError:
            raise InputError(f"{suffix} files need {package}: pip install 'r3con[office]'") from None
    try:
        if suffix == ".docx":
            return _docx(raw)
        if suffix == ".xlsx":
            return _xlsx(raw)
        if suffix == ".eml":
            return _eml(raw, html_text)
        return _epub(raw, html_text)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - each library has its own errors for a damaged file
        raise InputError(f"cannot read the {suffix} file ({type(exc).__name__}: {str(exc)[:200]}); "
                         "check that it opens in its own application") from exc


def _docx(raw: bytes) -> Parsed:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = docx.Document(io.BytesIO(raw))
    blocks: list[str] = []
    heading: str | None = None
    for block in document.iter_inner_content():  # paragraphs and tables in document order
        if isinstance(block, Paragraph):
            text = block.text.strip()
            if text:
                style = (block.style.name if block.style is not None else "") or ""
                if heading is None and (style == "Title" or style.startswith("Heading")):
                    heading = text
                blocks.append(text)
        elif isinstance(block, Table):
            blocks.append("\n".join(" | ".join(cell.text.strip() for cell in _unique(row.cells))
                                    for row in block.rows))
    title = (document.core_properties.title or "").strip() or heading
    return title, "\n\n".join(blocks), None


def _unique(cells: Iterable[Any]) -> list[Any]:
    """A row's cells, a merged cell once (python-docx repeats it for each grid column it spans)."""
    seen: list[Any] = []
    for cell in cells:
        if not any(cell._tc is s._tc for s in seen):
            seen.append(cell)
    return seen


def _xlsx(raw: bytes) -> Parsed:
    """Each sheet as CSV text under a "# Sheet: NAME" line; formulas as their last computed values."""
    import openpyxl

    book = openpyxl.load_workbook(io.BytesIO(raw), read_only=True, data_only=True)
    try:
        parts: list[str] = []
        for sheet in book.worksheets:
            rows = [["" if v is None else _cell(v) for v in row] for row in sheet.iter_rows(values_only=True)]
            while rows and not any(rows[-1]):
                rows.pop()
            width = max((max((i + 1 for i, v in enumerate(r) if v), default=0) for r in rows), default=0)
            if not width:
                continue
            buffer = io.StringIO()
            csv.writer(buffer, lineterminator="\n").writerows(r[:width] for r in rows)
            parts.append(f"# Sheet: {sheet.title}\n{buffer.getvalue().rstrip()}")
        title = (book.properties.title or "").strip() or None
    finally:
        book.close()
    return title, "\n\n".join(parts), None


def _cell(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _eml(raw: bytes, html_text: Callable[[str], tuple[str, str]]) -> Parsed:
    """The headers people read, the body (plain text, else HTML as text), and the attachments listed."""
    message = cast(EmailMessage, BytesParser(policy=policy.default).parsebytes(raw))  # policy.default: EmailMessage
    lines = [f"{name}: {message[name]}" for name in ("From", "To", "Cc", "Date", "Subject") if message[name]]
    body = message.get_body(preferencelist=("plain", "html"))
    text = ""
    if body is not None:
        content = body.get_content()
        text = html_text(content)[1] if body.get_content_type() == "text/html" else str(content)
    attached = [f"- {part.get_filename() or '(unnamed)'} ({part.get_content_type()}, "
                f"{len(part.get_payload(decode=True) or b''):,} bytes)" for part in message.iter_attachments()]
    out = "\n".join(lines) + "\n\n" + text.strip()
    if attached:
        out += "\n\nAttachments (not read):\n" + "\n".join(attached)
    subject = str(message["Subject"] or "").strip()
    return subject or None, out.strip(), None


def _epub(raw: bytes, html_text: Callable[[str], tuple[str, str]]) -> Parsed:
    """The chapters in reading order (the spine), each as text."""
    import ebooklib
    from ebooklib import epub

    book = epub.read_epub(io.BytesIO(raw), options={"ignore_ncx": True})
    chapters: list[str] = []
    for item_id, _linear in book.spine:
        item = book.get_item_with_id(item_id)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        text = html_text(item.get_content().decode("utf-8", errors="replace"))[1]
        if text.strip():
            chapters.append(text.strip())
    titles = book.get_metadata("DC", "title")
    title = str(titles[0][0]).strip() if titles and titles[0] and titles[0][0] else None
    return title, "\n\n".join(chapters), None
