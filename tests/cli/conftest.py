"""Shared by the CLI tests: no R3CON_* / OPENAI_* variable of the shell leaks in, and a small corpus."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _clean(clean_env):
    """No R3CON_* / OPENAI_* variable of the shell leaks in."""


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Registry\n\nAnn Lee is 34 years old and lives in Oslo.")
    (folder / "b.md").write_text("# Letter\n\nBob Stone, aged 41, wrote to Ann Lee.")
    (folder / "c.txt").write_text("Census\n\nCara Holm, 29, moved to Bergen.")
    return folder
