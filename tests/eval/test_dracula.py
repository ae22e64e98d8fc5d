from r3con.eval.dracula import load_dracula

from ._fakes import shared_data


def test_dracula_has_46_documents_one_question_and_two_golds():
    data = shared_data("dracula")
    ts = load_dracula(data)
    (task,) = ts.tasks
    assert task.id == "death_toll"
    assert len(task.documents) == 46
    assert task.documents[9].title == "Log of the “Demeter.”"
    assert task.documents[9].text.startswith("Varna to Whitby.")
    assert task.gold.startswith("13")
    assert task.gold_lenient is not None and task.gold_lenient.startswith("12")
    assert "Mr. Swales" in task.gold_lenient  # the lenient gold is phrased against the strict one, which it carries
