"""Readers that turn a file into its title and text. Third-party errors become InputError here
(their messages leave the path out: the caller names the file).

A file that holds no usable text raises NotText (binary, no text layer); one that is not read as its
kind (a CSV with an unterminated quote, JSON Lines with a bad line) is kept as plain text,
with a warning that names the line, never merged or renumbered silently.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from ._formats import OFFICE_SUFFIXES, read_office
from .errors import EncryptedDocument, InputError

SUPPORTED_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".json", ".jsonl", ".csv", ".html", ".htm", ".pdf",
                                *OFFICE_SUFFIXES})
# for messages and --help: every suffix, in the order users know the kinds
READABLE = ".txt .md .markdown .json .jsonl .csv .html .htm .pdf .docx .xlsx .eml .epub"
# a title that names a file or a tool's placeholder ("pdfsrc.html", "Microsoft Word - a.doc", "Untitled")
_JUNK_TITLE = re.compile(r"^(?:[\w ~$.-]*\.(?:html?|pdf|docx?|rtf|odt|txt|tex|dvi|indd|qxd|tmp|xlsx?|pptx?|ps)"
                         r"|microsoft (?:word|excel|powerpoint) - .*|untitled(?: document)?\d*|title|document\d*|"
                         r"\(?anonymous\)?|-+)$", re.IGNORECASE)
_MAX_TITLE = 160
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
OCR_HINT = "no text layer: OCR it first (e.g. ocrmypdf)"


class NotText(Exception):
    """The file holds no text r3con can use; `kind` groups the reason (binary, no text layer)."""

    def __init__(self, reason: str, kind: str):
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


@dataclass(frozen=True)
class FileText:
    """What a reader got from a file: `encoding` when it was not UTF-8, `warning` when not read as its kind."""

    title: str
    text: str
    encoding: str | None = None
    warning: str | None = None


def read_document(path: Path, *, pdf_password: str | None = None) -> FileText:
    """The title and text of the file at `path` (`pdf_password` opens encrypted PDFs); NotText or InputError
    when there is none to read."""
    suffix = path.suffix.lower()
    if suffix in OFFICE_SUFFIXES:
        title, body, warning = read_office(path, lambda html: _read_html(html, path))
        return FileText(usable_title(title, path), body, warning=warning)
    try:
        if suffix == ".pdf":
            return _read_pdf(path, pdf_password)
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read it: {exc.strerror or exc}; check the path and its permissions") from exc
    text, encoding = decode(raw)
    if suffix in {".html", ".htm"}:
        title, body = _read_html(text, path)
        return FileText(title, body, encoding)
    if suffix in {".json", ".jsonl"}:
        body, warning = _read_json(text, lines=suffix == ".jsonl")
        return FileText(path.stem, body, encoding, warning)
    if suffix == ".csv":
        body, warning = _read_csv(text)
        return FileText(path.stem, body, encoding, warning)
    if suffix in {".md", ".markdown"}:
        m = re.search(r"^#\s+(.+)$", text, flags=re.MULTILINE)
        return FileText((m.group(1).strip()[:_MAX_TITLE] if m else path.stem), text, encoding)
    title, text = _title_from_first_line(text, path)
    return FileText(title, text, encoding)


def usable_title(title: object, path: Path) -> str:
    """A document's own title when it is one, else the file's name (a browser-printed PDF says "pdfsrc.html")."""
    text = " ".join(str(title or "").split())
    return text[:_MAX_TITLE] if text and not _JUNK_TITLE.match(text) else path.stem


def decode(raw: bytes) -> tuple[str, str | None]:
    """(text, encoding): None for UTF-8; otherwise the detected one. NotText for bytes that are no text."""
    for bom, marked in _BOMS:
        if raw.startswith(bom):
            try:
                return raw.decode(marked), (None if marked == "utf-8-sig" else marked)
            except UnicodeDecodeError:
                break
    if b"\x00" in raw:
        raise NotText("binary (NUL bytes): not a text file", "binary")
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        pass
    encoding = _detect(raw)
    if encoding is None:
        raise NotText("binary: no text encoding fits its bytes", "binary")
    return raw.decode(encoding), encoding


def _detect(raw: bytes) -> str | None:
    """The encoding charset-normalizer finds least chaotic; among equals, cp1252 (Western text's usual one)."""
    from charset_normalizer import from_bytes

    matches = list(from_bytes(raw))
    if not matches:
        return None
    least = min(m.chaos for m in matches)
    calm = [m for m in matches if m.chaos <= least + 0.01]
    if any("cp1252" in m.could_be_from_charset for m in calm):
        return "cp1252"
    return str(codecs.lookup(calm[0].encoding).name)


def _title_from_first_line(text: str, path: Path) -> tuple[str, str]:
    """A short first line followed by a blank line is the title (as in many plain-text corpora)."""
    stripped = text.lstrip("\ufeff")
    first, sep, rest = stripped.partition("\n")
    if sep and first.strip() and len(first.strip()) <= _MAX_TITLE and rest.startswith(("\n", "\r\n")):
        return first.strip(), text
    return path.stem, text


def _read_json(text: str, *, lines: bool) -> tuple[str, str | None]:
    """Pretty-printed JSON; a line (JSON Lines) or a file that does not parse is kept verbatim, with a warning."""
    if not lines:
        try:
            return json.dumps(json.loads(text), ensure_ascii=False, indent=1), None
        except json.JSONDecodeError as exc:
            return text, f"not valid JSON ({exc.msg} at line {exc.lineno}); read as plain text"
    out: list[str] = []
    bad: list[tuple[int, str]] = []
    # split on \n only: str.splitlines also breaks at U+2028 and other separators JSON strings may hold
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            out.append(json.dumps(json.loads(line), ensure_ascii=False, indent=1))
        except json.JSONDecodeError as exc:
            bad.append((number, exc.msg))
            out.append(line.rstrip("\r"))
    if not bad:
        return "\n".join(out), None
    numbers = ", ".join(str(n) for n, _ in bad[:10]) + (f" and {len(bad) - 10} more" if len(bad) > 10 else "")
    which = "line" if len(bad) == 1 else "lines"
    return "\n".join(out), f"{which} {numbers} not valid JSON ({bad[0][1]}); kept as plain text"


def _read_csv(text: str) -> tuple[str, str | None]:
    """Rows as 'a | b' lines; a CSV that does not parse (an unterminated quote) is read as plain text."""
    reader = csv.reader(io.StringIO(text), strict=True)
    rows: list[list[str]] = []
    start = 1
    try:
        for row in reader:
            rows.append(row)
            start = reader.line_num + 1
    except csv.Error as exc:
        what = "unterminated quote" if "end of data" in str(exc) else str(exc)
        return text, f"CSV record at line {start}: {what}; read as plain text"
    return "\n".join(" | ".join(cell.strip() for cell in row) for row in rows), None


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


def _read_pdf(path: Path, password: str | None = None) -> FileText:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, PdfReadError

    pypdf_log = logging.getLogger("pypdf")
    level = pypdf_log.level
    pypdf_log.setLevel(logging.ERROR)  # its repair notes ("EOF marker not found") would cut into the progress
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(password or ""):  # "": opens PDFs locked only against editing
            if password:
                raise EncryptedDocument(f"{path} is encrypted and the password given does not open it; "
                                        "check --pdf-password (or R3CON_PDF_PASSWORD)")
            raise EncryptedDocument(f"{path} is encrypted: pass --pdf-password (or set R3CON_PDF_PASSWORD)")
        pages = [page.extract_text() or "" for page in reader.pages]
        title = usable_title(reader.metadata.title if reader.metadata else None, path)
    except DependencyError as exc:
        raise InputError(f"{path} is encrypted with AES, which needs the cryptography package: "
                         "pip install cryptography") from exc
    except (PdfReadError, OSError, ValueError) as exc:
        raise InputError(f"cannot read the PDF: {exc}; check that the file is a valid PDF") from exc
    finally:
        pypdf_log.setLevel(level)
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        raise NotText(OCR_HINT, "no text layer")
    # blank pages are common; a file mostly of pages without text is a scan with a text cover or notes
    blank = [i for i, p in enumerate(pages, start=1) if not p.strip()]
    warning = None
    if len(blank) * 2 > len(pages):
        warning = f"{len(blank)} of {len(pages)} pages have no text layer: OCR it first (e.g. ocrmypdf)"
    return FileText(str(title)[:_MAX_TITLE], text, warning=warning)
