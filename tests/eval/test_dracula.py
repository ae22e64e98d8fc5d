from r3con.eval.dracula import load_dracula

from ..fakes import FIXTURE_DATA, real_data


def test_dracula_has_46_documents_one_question_and_two_golds():
    data = real_data("dracula")
    ts = load_dracula(data)
    (task,) = ts.tasks
    assert task.id == "death_toll"
    assert len(task.documents) == 46
    assert task.documents[9].title == "Log of the “Demeter.”"
    assert task.documents[9].text.startswith("Varna to Whitby.")
    assert task.gold.startswith("13")
    assert task.gold_lenient is not None and task.gold_lenient.startswith("12")
    assert "Mr. Swales" in task.gold_lenient  # the lenient gold is phrased against the strict one, which it carries


def test_a_slice_of_the_corpus_loads_with_the_titles_of_its_manifest():
    (task,) = load_dracula(FIXTURE_DATA / "dracula").tasks
    assert [d.number for d in task.documents] == list(range(1, 13))
    demeter = next(d for d in task.documents if "Demeter" in d.title)
    assert demeter.text.startswith("Varna to Whitby.") and "Demeter" not in demeter.text.split("\n", 1)[0]
    assert task.gold.startswith("13")
