"""Readers that turn a file into (title, text). Third-party errors become InputError here."""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

from .errors import EncryptedDocument, InputError

SUPPORTED_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".json", ".jsonl", ".csv", ".html", ".htm", ".pdf"})
_MAX_TITLE = 160


def read_document(path: Path, *, pdf_password: str | None = None) -> tuple[str, str]:
    """Return (title, text) of the file at `path`; `pdf_password` opens encrypted PDFs."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".pdf":
            return _read_pdf(path, pdf_password)
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}; check the path and its permissions") from exc
    text = _decode(raw, path)
    if suffix in {".html", ".htm"}:
        return _read_html(text, path)
    if suffix in {".json", ".jsonl"}:
        return path.stem, _read_json(text, path, lines=suffix == ".jsonl")
    if suffix == ".csv":
        return path.stem, _read_csv(text)
    if suffix in {".md", ".markdown"}:
        m = re.search(r"^#\s+(.+)$", text, flags=re.MULTILINE)
        return (m.group(1).strip()[:_MAX_TITLE] if m else path.stem), text
    return _title_from_first_line(text, path)


def _decode(raw: bytes, path: Path) -> str:
    for encoding in ("utf-8-sig", "utf-16"):
        try:
            text = raw.decode(encoding)
            if "\x00" not in text:
                return text
        except UnicodeDecodeError:
            continue
    if b"\x00" in raw[:4096]:
        raise InputError(f"{path} looks binary; pass text, Markdown, JSON, CSV, HTML or PDF files")
    return raw.decode("latin-1")


def _title_from_first_line(text: str, path: Path) -> tuple[str, str]:
    """A short first line followed by a blank line is the title (as in many plain-text corpora)."""
    stripped = text.lstrip("\ufeff")
    first, sep, rest = stripped.partition("\n")
    if sep and first.strip() and len(first.strip()) <= _MAX_TITLE and rest.startswith(("\n", "\r\n")):
        return first.strip(), text
    return path.stem, text


def _read_json(text: str, path: Path, *, lines: bool) -> str:
    try:
        if lines:
            values = [json.loads(line) for line in text.splitlines() if line.strip()]
            return "\n".join(json.dumps(v, ensure_ascii=False, indent=1) for v in values)
        return json.dumps(json.loads(text), ensure_ascii=False, indent=1)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}); fix it or rename it .txt") from exc


def _read_csv(text: str) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    return "\n".join(" | ".join(cell.strip() for cell in row) for row in rows)


class _HTMLText(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template"}
    _BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "table"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        elif tag == "title":
            self._in_title = False
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.parts.append(data)


def _read_html(text: str, path: Path) -> tuple[str, str]:
    parser = _HTMLText()
    parser.feed(text)
    body = re.sub(r"[ \t]+", " ", "".join(parser.parts))
    body = re.sub(r"\n\s*\n(\s*\n)+", "\n\n", body).strip()
    return (parser.title.strip()[:_MAX_TITLE] or path.stem), body


def _read_pdf(path: Path, password: str | None = None) -> tuple[str, str]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, PdfReadError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(password or ""):  # "": opens PDFs locked only against editing
            if password:
                raise EncryptedDocument(f"{path} is encrypted and the password given does not open it; "
                                        "check --pdf-password (or R3CON_PDF_PASSWORD)")
            raise EncryptedDocument(f"{path} is encrypted: pass --pdf-password (or set R3CON_PDF_PASSWORD)")
        pages = [page.extract_text() or "" for page in reader.pages]
        title = (reader.metadata.title if reader.metadata and reader.metadata.title else "") or path.stem
    except DependencyError as exc:
        raise InputError(f"{path} is encrypted with AES, which needs the cryptography package: "
                         "pip install cryptography") from exc
    except (PdfReadError, OSError, ValueError) as exc:
        raise InputError(f"cannot read PDF {path}: {exc}; check that the file is a valid PDF") from exc
    return str(title)[:_MAX_TITLE], "\n\n".join(p.strip() for p in pages if p.strip())
