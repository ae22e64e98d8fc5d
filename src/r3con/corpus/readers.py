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
import os
import re
import stat
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from pathlib import Path

from ..artifacts.jsonstream import nests_deeper
from ..errors import EncryptedDocument, InputError
from ._formats import OFFICE_SUFFIXES, read_office

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
    try:
        if suffix == ".pdf":
            return _read_pdf(path, pdf_password)
        raw = _read_regular(path)
    except OSError as exc:
        raise InputError(f"cannot read it: {exc.strerror or exc}; check the path and its permissions") from exc
    if suffix in OFFICE_SUFFIXES:
        title, body, warning = read_office(suffix, raw, lambda html: _read_html(html, path))
        return FileText(usable_title(title, path), body, warning=warning)
    text, encoding, dropped = decode_text(raw)
    got = _read_text(path, suffix, text, encoding)
    if dropped:
        return replace(got, warning="; ".join(w for w in (dropped, got.warning) if w))
    return got


def _read_text(path: Path, suffix: str, text: str, encoding: str | None) -> FileText:
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


def _read_regular(path: Path) -> bytes:
    """The bytes of a regular file; NotText for anything else, found out without blocking on it (a pipe that
    took the file's place after the walk looked would otherwise wait for a writer forever)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotText("not a regular file (a pipe, socket or device): not read", "special file")
        return f.read()


def decode(raw: bytes) -> tuple[str, str | None]:
    """(text, encoding): None for UTF-8; otherwise the detected one. NotText for bytes that are no text."""
    text, encoding, _ = decode_text(raw)
    return text, encoding


def decode_text(raw: bytes) -> tuple[str, str | None, str | None]:
    """(text, encoding, warning): `decode`, and a warning when stray NUL bytes were dropped to read the text.

    NUL bytes mean UTF-16 or UTF-32 without a byte order mark when the text decodes cleanly as one of them,
    a few stray NULs in UTF-8 text when the rest is UTF-8 (they are dropped, with a warning), else binary."""
    for bom, marked in _BOMS:
        if raw.startswith(bom):
            try:
                return raw.decode(marked), (None if marked == "utf-8-sig" else marked), None
            except UnicodeDecodeError:
                break
    if b"\x00" in raw:
        if wide := _wide_encoding(raw):
            return raw.decode(wide), wide, None
        nuls = raw.count(0)
        try:
            if nuls * _MAX_STRAY_NUL_SHARE > len(raw):
                raise UnicodeDecodeError("utf-8", raw, 0, 1, "too many NUL bytes")
            text = raw.replace(b"\x00", b"").decode("utf-8")
        except UnicodeDecodeError:
            raise NotText("binary (NUL bytes): not a text file", "binary") from None
        where = raw.index(0)
        return text, None, (f"{nuls} stray NUL byte{'s' * (nuls > 1)} dropped (the first at byte {where:,}); "
                            "read as text without them")
    try:
        return raw.decode("utf-8"), None, None
    except UnicodeDecodeError:
        pass
    encoding = _detect(raw)
    if encoding is None:
        raise NotText("binary: no text encoding fits its bytes", "binary")
    return raw.decode(encoding), encoding, None


_MAX_STRAY_NUL_SHARE = 100  # at most one byte in this many may be a NUL for the rest to be read as text
# (encoding, width, bytes of each character that are NUL in Latin-script text, the byte that never is)
_WIDE = (("utf-32-le", 4, (2, 3), 0), ("utf-32-be", 4, (0, 1), 3), ("utf-16-le", 2, (1,), 0), ("utf-16-be", 2, (0,), 1))


def _wide_encoding(raw: bytes) -> str | None:
    """UTF-32 or UTF-16 (without a byte order mark) that `raw` decodes to as readable text, or None.

    Wide text of Latin script has its NUL bytes in the same places of every character (the high byte of
    each UTF-16 unit), and none elsewhere; UTF-8 text with a stray NUL does not."""
    sample = raw[:65536]
    for encoding, width, places, low in _WIDE:
        if len(raw) % width:
            continue
        columns = [sample[i::width] for i in range(width)]
        if not all(columns):
            continue
        zero = [c.count(0) / len(c) for c in columns]
        if min(zero[i] for i in places) < 0.3 or zero[low] > 0.05:
            continue
        head = sample[: len(sample) - len(sample) % width].decode(encoding, errors="ignore")
        readable = sum(1 for c in head if c.isprintable() or c in "\n\r\t")
        if "\x00" in head or readable < 0.97 * len(head):
            continue
        try:
            raw.decode(encoding)
        except UnicodeDecodeError:
            continue
        return encoding
    return None


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
    head = text[:64]  # no copy of a large text: only its head is looked at
    start = len(head) - len(head.lstrip("\ufeff"))
    end = text.find("\n", start)
    first = text[start:end] if end >= 0 else ""
    if first.strip() and len(first.strip()) <= _MAX_TITLE and text.startswith(("\n", "\r\n"), end + 1):
        return first.strip(), text
    return path.stem, text


def _read_json(text: str, *, lines: bool) -> tuple[str, str | None]:
    """Pretty-printed JSON; a line (JSON Lines) or a file that does not parse is kept verbatim, with a warning."""
    if not lines:
        if nests_deeper(text, MAX_JSON_DEPTH):
            return text, f"JSON nested deeper than {_DEEP}; read as plain text"
        try:
            return _pretty(json.loads(text)), None
        except json.JSONDecodeError as exc:
            return text, f"not valid JSON ({exc.msg} at line {exc.lineno}); read as plain text"
        except RecursionError:  # what the brackets did not tell
            return text, f"JSON nested deeper than {_DEEP}; read as plain text"
    out: list[str] = []
    bad: list[tuple[int, str]] = []
    # split on \n only: str.splitlines also breaks at U+2028 and other separators JSON strings may hold
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        if nests_deeper(line, MAX_JSON_DEPTH):
            bad.append((number, f"nested deeper than {_DEEP}"))
            out.append(line.rstrip("\r"))
            continue
        try:
            out.append(_pretty(json.loads(line)))
        except json.JSONDecodeError as exc:
            bad.append((number, exc.msg))
            out.append(line.rstrip("\r"))
        except RecursionError:
            bad.append((number, f"nested deeper than {_DEEP}"))
            out.append(line.rstrip("\r"))
    if not bad:
        return "\n".join(out), None
    numbers = ", ".join(str(n) for n, _ in bad[:10]) + (f" and {len(bad) - 10} more" if len(bad) > 10 else "")
    which = "line" if len(bad) == 1 else "lines"
    return "\n".join(out), f"{which} {numbers} not valid JSON ({bad[0][1]}); kept as plain text"


MAX_JSON_DEPTH = 500  # levels of nesting a JSON document is parsed to: deeper, it is read as plain text
_DEEP = f"{MAX_JSON_DEPTH} levels"


def _pretty(value: object) -> str:
    """Indented JSON; a string holding a lone surrogate (`"\\ud800"` is valid JSON) stays escaped, as no
    file can hold it otherwise."""
    text = json.dumps(value, ensure_ascii=False, indent=1)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, indent=1)
    return text


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
