"""What the app says of a run folder in words: a fallback in one sentence, an error without its exception
class, a stopped run as stopped, and only the workspace's own runs."""

from __future__ import annotations

import json

import pytest

from r3con.app.history import details, fallback_sentence, folder, plain_error, strip_class
from r3con.errors import InputError


@pytest.mark.parametrize(("text", "plain"), [
    ("CancelledError: ", ""),
    ("ValueError: bad value", "bad value"),
    ("r3con.errors.OutputError: the reply was empty", "the reply was empty"),
    ("BudgetExceeded: the cap of $1 is spent", "the cap of $1 is spent"),
    ("the reply was empty after 3 attempts (schema stage): raise it", "the reply was empty after 3 attempts (schema stage): raise it"),
    ("HTTP 500: server error", "HTTP 500: server error"),
])
def test_a_message_loses_its_exception_class_and_nothing_else(text, plain):
    assert strip_class(text) == plain


def test_a_fallback_is_one_plain_sentence():
    line = fallback_sentence([{"stage": "schema", "failed": "OutputError: the reply was empty after 3 attempts",
                               "fallback": "answered directly from the notes, without records"}])
    assert line == ("The schema stage failed (the reply was empty after 3 attempts), so answered directly from "
                    "the notes, without records.")
    assert fallback_sentence([]) is None


def test_a_stopped_run_reads_as_stopped_and_a_failed_one_without_class_names():
    assert plain_error({"stage": "relevance", "kind": "interrupted", "error": "CancelledError: "}) == \
        "The run was stopped during relevance; what it did is kept, and Resume continues it."
    assert plain_error({"stage": "populate", "kind": "error", "error": "ConfigError: set --base-url"}) == \
        "The run failed during populate: set --base-url"


def test_details_name_the_cited_files_and_the_fallback(tmp_path):
    run = tmp_path / "runs" / "20260101-000000-q-abcd"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({
        "task": "q?", "documents": [{"doc": 1, "source": "/d/a.txt"}, {"doc": 2, "source": "/d/b.txt"}],
        "fallbacks": [{"stage": "schema", "failed": "no schema", "fallback": "answered from the notes"}]}))
    (run / "result.json").write_text(json.dumps({"answer": "A", "evidence": [{"doc": 2}], "reuse": None}))
    got = details(run)
    assert (got["status"], got["used"], got["read"]) == ("finished", ["/d/b.txt"], ["/d/a.txt", "/d/b.txt"])
    assert got["fallback"] == "The schema stage failed (no schema), so answered from the notes."
    assert folder(tmp_path / "runs", run.name) == run
    for name in ("..", "../runs", "", ".hidden", "nope"):
        with pytest.raises(InputError):
            folder(tmp_path / "runs", name)
