"""A documents folder as users have them: good files beside every kind of bad input, and what each should become."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

from pypdf import PdfWriter

LATIN = "Müller wohnt in Köln, sagt Café-Besitzerin Ana. Größe: 1,80 m; Preis: 5 Mark."


def blank_pdf(pages: int = 1) -> bytes:
    """A PDF whose pages hold no text (what a scanner without OCR produces)."""
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_bytes() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("word/document.xml", "<w:document>Quarterly report</w:document>")
    return out.getvalue()


def messy_folder(root: Path) -> dict[str, str]:
    """Fill `root`; return {relative path: category} for every file, its category what a run must report.

    Files inside a folder a walk leaves out map to 'excluded:<folder>'.
    """
    root.mkdir(parents=True, exist_ok=True)
    expected: dict[str, str] = {}

    def put(rel: str, data: str | bytes, category: str) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
        expected[rel] = category

    put("notes.txt", "Field notes\n\nAnn Lee is 34 years old and lives in Oslo.\n", "read")
    put("saved/notes.txt", "Field notes\n\nAnn Lee is 34 years old and lives in Oslo.\n", "duplicates")
    put("letter.md", "# Letter\n\nBob Stone, aged 41, wrote to Ann Lee.\n", "read")
    put("latin.txt", LATIN.encode("latin-1"), "read")
    put("people.csv", 'name,age\nAnn,34\n"Bob Stone,41\nCid,29\n', "read")
    put("events.jsonl", '{"who": "Ann", "age": 34}\n{"who": "Bob", "age": 41}\n{"who": "Cid", age: 29}\n'
        '{"who": "Dee", "age": 52}\n', "read")
    put("scan.pdf", blank_pdf(), "skipped")
    put("empty.txt", "", "skipped")
    put("blank.md", "   \n\n", "skipped")
    put("slides.pptx", docx_bytes(), "skipped")  # a zip of a kind r3con does not read
    put("photo.png", b"\x89PNG\r\n\x1a\n" + bytes(64), "skipped")
    put("blob.txt", b"PK\x03\x04\x00\x00binary\x00data", "skipped")
    put("broken.pdf", b"%PDF-1.4 this is not really a PDF", "unreadable")
    os.symlink(root / "moved-away.txt", root / "gone.txt")  # a link whose target was moved: cannot be read
    expected["gone.txt"] = "unreadable"
    put(".env.txt", "OPENAI_API_KEY=sk-secret\n", "excluded:.env.txt")
    put(".git/HEAD", "ref: refs/heads/main\n", "excluded:.git")
    put(".git/notes.txt", "a commit message\n", "excluded:.git")
    put("node_modules/pkg/README.md", "# pkg\n\nA dependency.\n", "excluded:node_modules")
    put(".venv/pyvenv.cfg", "home = /usr/bin\n", "excluded:.venv")
    put("env/pyvenv.cfg", "home = /usr/bin\n", "excluded:env")
    put("env/lib/site.txt", "a virtualenv's file\n", "excluded:env")
    put("r3con-runs/2026-01-01-q/answer.txt", "an earlier answer\n", "excluded:r3con-runs")
    put("old-run/manifest.json", '{"task": "q", "r3con_version": "0.1.0"}', "excluded:old-run")
    put("old-run/calls.jsonl", '{"stage": "relevance"}\n', "excluded:old-run")
    put("old-run/answer.txt", "an earlier answer\n", "excluded:old-run")
    return expected


def categories(inputs: dict, root: Path, cwd: Path | None = None) -> dict[str, list[str]]:
    """{path relative to `root`: [the categories it appears in]} from an `inputs` JSON object."""
    seen: dict[str, list[str]] = {}
    for category in ("read", "skipped", "unreadable", "duplicates", "excluded"):
        for entry in inputs[category]:
            source = os.path.join(cwd or os.getcwd(), entry["source"])
            seen.setdefault(Path(os.path.relpath(source, root)).as_posix(), []).append(category)
    return seen


def assert_every_file_accounted(inputs: dict, root: Path, expected: dict[str, str], cwd: Path | None = None) -> None:
    """Every file appears in exactly one category, the expected one (or under the excluded folder)."""
    seen = categories(inputs, root, cwd)
    for rel, category in expected.items():
        if category.startswith("excluded:"):
            folder = category.split(":", 1)[1]
            assert seen.get(folder) == ["excluded"], (rel, seen.get(folder))
        else:
            assert seen.get(rel) == [category], (rel, seen.get(rel))
    listed = {rel for rel in seen}
    known = {rel for rel, c in expected.items() if not c.startswith("excluded:")}
    known |= {c.split(":", 1)[1] for c in expected.values() if c.startswith("excluded:")}
    assert listed == known, listed ^ known
