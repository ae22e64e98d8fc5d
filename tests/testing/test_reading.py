"""The scripted server reads a request by its shape, so a reworded prompt template still gets a sensible reply."""

from collections.abc import Iterator

import pytest

import r3con
from r3con.pipeline.method import run
from r3con.prompts import render as _prompts
from r3con.testing._reading import Reading

TASK = "Which ships sank in the harbour, and when?"
TEXTS = [
    ("Harbour log", "The Mary Rose sank in the harbour in 1545. The weather was calm that morning."),
    ("Letter", "Dear Ann, the garden is lovely. The Vasa sank in the harbour in 1628, my uncle says."),
    ("Recipe", "Mix the flour with two eggs. Bake for an hour."),
]

# Every template the run uses, reworded and with its tags renamed: what a prompt engineer might do (the notes
# and their index are formatted in Python, not by a template).
EDITS = {
    "relevance": ("Summarise what the text {{ where | default('above') }} says about this question.\n\n"
                  "<question>\n{{ task }}\n</question>\n\nAt most {{ max_words }} words; NONE when nothing."
                  "{% if others %}\n\nWhat was found elsewhere:\n{{ others }}{% endif %}"),
    "document": ('<source id="{{ doc.number }}" name="{{ doc.title | attr }}">\n{{ doc.text }}\n</source>'),
    "populate": ("Fill in records from the text {{ where | default('above') }}.\n\n<question>\n{{ task }}\n</question>\n\n"
                 "<format>\n{{ schema }}\n</format>\n{% if notes %}\n{{ notes }}\n{% endif %}\nOne JSON object."),
}


@pytest.fixture
def edited_templates(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Render the run's prompts from `EDITS` instead of the package's templates."""
    original = _prompts.template_source

    def source(name: str) -> str:
        return EDITS.get(name) or original(name)

    monkeypatch.setattr(_prompts, "template_source", source)
    _prompts._environment.cache_clear()
    yield
    _prompts._environment.cache_clear()


async def test_a_reworded_template_still_gets_notes_and_records(edited_templates, fake_server, tmp_path):
    assert "<task>" not in _prompts.render("relevance", task=TASK, max_words=50, others="").text
    settings = r3con.Settings.resolve(env={}, base_url=fake_server.base_url, api_key="x", out_dir=tmp_path)
    result = await run(TASK, r3con.documents_from_texts(TEXTS), settings)
    first = result.notes[0]
    assert {k for k, v in first.items() if v} == {"1", "2"}, "the ship documents get notes, the recipe none"
    assert "Mary Rose sank" in first["1"] and "Vasa sank" in first["2"]
    assert "garden" not in first["2"], "a note quotes what bears on the task"
    names = " | ".join(str(r.get("name")) for rows in result.records.values() for r in rows)
    assert "Mary Rose" in names and "Vasa" in names
    assert all(r["_match"] == "exact" for rows in result.records.values() for r in rows)
    assert "Mary Rose" in result.answer or "Vasa" in result.answer


def test_the_document_is_the_section_the_doc_header_names_not_the_longest():
    note = "A long note about another document. " * 20
    body = {"messages": [{"role": "user", "content": (
        f'<a k="7">\nThe Vasa sank.\n</a>\n\n<b>\nWhich ships sank?\n</b>\n\n<c>\n<n k="3">\n{note}\n</n>\n</c>')}]}
    reading = Reading.of(body, {"X-R3con-Doc": "7", "X-R3con-Round": "2"})
    assert reading.document == "The Vasa sank." and reading.task == "Which ships sank?"
    assert [s.label for s in reading.notes] == ["3"] and reading.round == 2


def test_a_document_sent_on_its_own_without_tags_is_found():
    body = {"messages": [{"role": "system", "content": "You read documents."},
                         {"role": "user", "content": [{"type": "text", "text": "The Vasa sank in 1628. " * 5,
                                                       "cache_control": {"type": "ephemeral"}}]},
                         {"role": "user", "content": "<q>\nWhen did the Vasa sink?\n</q>"}]}
    reading = Reading.of(body)
    assert reading.document.startswith("The Vasa sank in 1628.") and reading.task == "When did the Vasa sink?"


def test_schema_and_data_are_told_apart_by_their_json():
    prompt = ('<t>\nhow many?\n</t>\n<x>\n{"type": "object", "properties": {"ships": {"type": "array"}}}\n</x>\n'
              '<y>\n{"ships": [{"_id": "R1.1", "name": "Vasa"}]}\n</y>')
    reading = Reading.of_messages([{"role": "user", "content": prompt}])
    assert reading.prompt_schema == {"type": "object", "properties": {"ships": {"type": "array"}}}
    assert reading.data == {"ships": [{"_id": "R1.1", "name": "Vasa"}]}
    assert reading.task == "how many?"
