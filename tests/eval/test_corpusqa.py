import json

import pytest

from r3con.errors import InputError
from r3con.eval.corpusqa import extract_final_answer, load_corpusqa, split_prompt
from r3con.eval.tasks import TaskFilter

from ._fakes import TINY_CORPUSQA


def test_documents_and_task_come_from_the_baked_prompt():
    ts = load_corpusqa(TINY_CORPUSQA)
    assert [t.id for t in ts.tasks] == ["financial_en_0001", "financial_en_0002", "education_en_0001"]
    first = ts.tasks[0]
    assert [d.title for d in first.documents] == ["Acme Corp 2023 annual report", "Beta Inc 2023 annual report"]
    assert first.documents[1].text == "Beta Inc reported revenue of $95 million in 2023.\nIt has 300 employees."
    assert first.task_text.startswith("Which company had the higher revenue in 2023?")
    assert '"The answer is: <answer>"' in first.task_text  # the output requirements are part of the task
    assert "You are given documents" not in first.task_text
    assert first.meta == {"domain": "financial_en", "language": "en"}
    # questions over one corpus share its documents; an untitled header is numbered
    assert ts.tasks[1].documents is first.documents
    assert ts.tasks[1].task_text.startswith("What is the total revenue")
    assert [d.title for d in ts.tasks[2].documents] == ["Document 1", "Document 2"]
    assert ts.tasks[1].gold == "215" and ts.tasks[2].gold == '["North High School"]'


def test_filters_on_domain(tmp_path):
    ts = load_corpusqa(TINY_CORPUSQA, TaskFilter(domains=("education_en",)))
    assert [t.id for t in ts.tasks] == ["education_en_0001"]


def test_folder_must_hold_the_release_file(tmp_path):
    with pytest.raises(InputError, match="1m_4domains.jsonl"):
        load_corpusqa(tmp_path)
    (tmp_path / "1m_4domains.jsonl").write_text(TINY_CORPUSQA.read_text())
    assert len(load_corpusqa(tmp_path).tasks) == 3


def test_a_row_without_question_marker_is_an_input_error(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"id": "financial_en_9", "prompt": "# Document 1: a\ntext", "answer": "x"}) + "\n")
    with pytest.raises(InputError, match="Question"):
        load_corpusqa(path)


def test_split_prompt_keeps_the_preamble_apart():
    preamble, sections, question = split_prompt("Intro\n# Document 1: T\nbody\n# Question: q?\nRules")
    assert preamble == "Intro" and sections == [(1, "T", "body")] and question == "q?\nRules"


@pytest.mark.parametrize(
    ("answer", "final"),
    [
        ("Reasoning...\nThe answer is: Acme Corp", "Acme Corp"),
        ("The answer is: 1\nwait\nThe answer is: **215**", "215"),
        ("the answer is：['a', 'b']", "['a', 'b']"),
        ("Just 42", "Just 42"),
        ("The answer is:", ""),
    ],
)
def test_the_final_answer_follows_the_answer_is(answer, final):
    assert extract_final_answer(answer) == final
