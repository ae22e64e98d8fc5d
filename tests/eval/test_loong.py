import json
from collections import Counter

import pytest

from r3con.errors import ConfigError, InputError
from r3con.eval.benchmarks import paper_coverage
from r3con.eval.loong import SKIP_LEGAL, load_loong, task_text
from r3con.eval.tasks import TaskFilter

from ..fakes import real_data
from ._fakes import shared_data


def test_task_text_drops_the_docs_slot_and_its_heading():
    row = {"prompt_template": "#Papers:\n{docs}\n\n{instruction}\n\n#The paper you need to analyze:\n{question}",
           "instruction": "Find citations.", "question": "OpenMoE"}
    assert task_text(row) == "Find citations.\n\n#The paper you need to analyze:\nOpenMoE"
    row = {"prompt_template": "{instruction}\n\n#Papers Provided:\n{docs}", "instruction": "Sort {question}", "question": "q"}
    assert task_text(row) == "Sort {question}"  # values are not substituted into each other
    row = {"prompt_template": "{docs}\n\n{instruction}\n\n{question}", "instruction": "Read.", "question": "Why?"}
    assert task_text(row) == "Read.\n\nWhy?"


def test_paper_sets_without_legal_hold_927_tasks_all_with_documents():
    ts = load_loong(real_data("loong"), TaskFilter(sets=(2, 3, 4)))
    assert len(ts.tasks) == 927
    assert ts.skipped == {SKIP_LEGAL: 350}
    assert Counter(t.meta["domain"] for t in ts.tasks) == {"financial": 597, "paper": 330}
    assert all(t.documents and all(d.text for d in t.documents) for t in ts.tasks)
    assert {t.meta["set"] for t in ts.tasks} == {2, 3, 4}


def test_tasks_are_built_as_upstream_builds_them():
    data = shared_data("loong")
    rows = {r["id"]: r for r in map(json.loads, (data / "loong.jsonl").read_text().splitlines())}
    ts = load_loong(data, TaskFilter(sets=(2,)))
    paper = next(t for t in ts.tasks if t.meta["domain"] == "paper")
    row = rows[paper.id]
    assert row["instruction"][:60] in paper.task_text and row["question"] in paper.task_text
    assert "{docs}" not in paper.task_text and "#Papers:" not in paper.task_text
    # a paper's title is its first Markdown heading, and its file is the whole text
    first = (data / "doc" / "paper" / row["doc"][0]).read_text()
    titles = {d.title for d in paper.documents}
    assert first.split("\n", 1)[0].strip("# ").strip() in titles
    assert sorted(d.source.rsplit("/", 1)[-1] for d in paper.documents) == sorted(row["doc"])
    # financial documents carry the company name as title, resolved by upstream's glob
    fin = next(t for t in ts.tasks if t.meta["domain"] == "financial" and t.meta["level"] != 4)
    assert sorted(d.title for d in fin.documents) == sorted(rows[fin.id]["doc"])
    assert all("2024-" in d.source for d in fin.documents)
    assert [d.number for d in fin.documents] == list(range(1, len(fin.documents) + 1))
    assert fin.gold == (rows[fin.id]["answer"] if isinstance(rows[fin.id]["answer"], str)
                        else json.dumps(rows[fin.id]["answer"], ensure_ascii=False))


def test_an_exact_company_name_wins_over_longer_names_that_contain_it():
    data = real_data("loong")
    ts = load_loong(data, TaskFilter(task_ids=("ff3aa0ab-8dff-4115-8365-0b734655b779",)))
    (task,) = ts.tasks
    by_title = {d.title: d.source for d in task.documents}
    assert by_title["AUDDIA INC."].endswith("2024-AUDDIA INC.-j.txt")


def test_shuffling_is_fixed_per_task():
    data = shared_data("loong")
    f = TaskFilter(sets=(2,), domains=("financial",), limit=5)
    a, b = load_loong(data, f), load_loong(data, f)
    assert [[d.title for d in t.documents] for t in a.tasks] == [[d.title for d in t.documents] for t in b.tasks]


def test_filters_and_limit():
    ts = load_loong(real_data("loong"), TaskFilter(sets=(3,), levels=(4,), languages=("en",), limit=7))
    assert len(ts.tasks) == 7
    assert all(t.meta["set"] == 3 and t.meta["level"] == 4 and t.meta["language"] == "en" for t in ts.tasks)


def test_legal_only_without_its_documents_is_a_clear_error():
    with pytest.raises(InputError, match="legal domain's documents"):
        load_loong(shared_data("loong"), TaskFilter(domains=("legal",)))


def test_unknown_domain():
    with pytest.raises(ConfigError, match="unknown Loong domain"):
        load_loong(shared_data("loong"), TaskFilter(domains=("medical",)))


def test_legal_tasks_load_when_legal_json_is_present(tmp_path):
    (tmp_path / "doc" / "legal").mkdir(parents=True)
    (tmp_path / "doc" / "legal" / "legal.json").write_text(json.dumps(
        {"案一": {"content": "内容一", "result": "判决一"}, "案二": {"content": "内容二", "result": "判决二"}}))
    row = {"id": "L1", "type": "legal", "level": 2, "set": 1, "language": "zh", "length": 10,
           "question": "哪一份？", "instruction": "仅根据上述判决文书回答。", "prompt_template": "{docs}\n\n{instruction}\n\n{question}",
           "doc": ["案一", "案二"], "answer": "《判决文书2》", "shuffle_doc": False}
    (tmp_path / "loong.jsonl").write_text(json.dumps(row, ensure_ascii=False) + "\n")
    ts = load_loong(tmp_path)
    (task,) = ts.tasks
    assert [(d.title, d.text) for d in task.documents] == [("判决文书1", "内容一判决一"), ("判决文书2", "内容二判决二")]
    assert task.task_text == "仅根据上述判决文书回答。\n\n哪一份？"


def test_a_task_whose_documents_are_missing_is_skipped_and_counted(tmp_path):
    (tmp_path / "doc" / "paper").mkdir(parents=True)
    row = {"id": "P1", "type": "paper", "level": 3, "set": 1, "language": "en", "question": "q", "instruction": "i",
           "prompt_template": "{docs}{instruction}{question}", "doc": ["absent.md"], "answer": "a"}
    (tmp_path / "loong.jsonl").write_text(json.dumps(row) + "\n")
    ts = load_loong(tmp_path)
    assert ts.tasks == () and sum(ts.skipped.values()) == 1


def test_a_broken_line_names_the_file_and_line(tmp_path):
    (tmp_path / "loong.jsonl").write_text('{"id": 1}\n{broken\n')
    with pytest.raises(InputError, match=r"loong.jsonl:1 lacks"):
        load_loong(tmp_path)
    (tmp_path / "loong.jsonl").write_text('\n{broken\n')
    with pytest.raises(InputError, match=r"loong.jsonl:2 is not valid JSON"):
        load_loong(tmp_path)


def test_the_local_copy_is_measured_against_the_papers_1277_tasks():
    coverage = paper_coverage(load_loong(real_data("loong"), TaskFilter(sets=(2, 3, 4))))
    assert coverage is not None and (coverage.paper, coverage.here) == (1277, 927)
    assert coverage.missing == {SKIP_LEGAL: 350}
    assert coverage.line() == ("loong: 927 of the paper's 1,277 tasks (sets 2-4, legal included); "
                               f"not in this copy: 350 tasks ({SKIP_LEGAL})")
    subset = paper_coverage(load_loong(real_data("loong"), TaskFilter(sets=(2, 3, 4), levels=(1,))))
    assert subset is not None and subset.subset and "selected by the filters" in subset.line()


def test_a_copy_with_every_document_holds_the_papers_whole_set(tmp_path):
    # a copy whose tasks of sets 2-4 number 1,277 and all load: nothing is missing
    rows = [{"id": f"t{i}", "type": "paper", "level": 1, "set": 2 + i % 3, "language": "en", "question": "Q?",
             "instruction": "", "prompt_template": "{docs}{question}", "doc": ["a.md"], "answer": "x"}
            for i in range(1277)]
    (tmp_path / "doc" / "paper").mkdir(parents=True)
    (tmp_path / "doc" / "paper" / "a.md").write_text("# A\ntext")
    (tmp_path / "loong.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    coverage = paper_coverage(load_loong(tmp_path, TaskFilter(sets=(2, 3, 4)), shuffle=False))
    assert coverage is not None and coverage.here == 1277 and not coverage.missing
    assert coverage.line().endswith("the paper's whole set")
