"""A user's model is known to the LLM cache by the version it declares, else by its code: an edited model is
not served its predecessor's replies, the same model is."""

import importlib.util
import sys
import textwrap

import pytest

from r3con.llm.identity import model_identity

MODEL = """
class Model:
    def __init__(self, generate=None, temperature=0.0):
        self.generate = generate
        self.temperature = temperature

    async def complete(self, request):
        return {reply!r}


def generate(messages):
    return {reply!r}
"""


@pytest.fixture
def load(tmp_path, monkeypatch):
    def load(name: str, reply: str):
        """A module `name` holding `Model` and `generate` that reply `reply`, imported as a user's code is."""
        path = tmp_path / f"{name}.py"
        path.write_text(MODEL.format(reply=reply))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)
        spec.loader.exec_module(module)
        return module
    return load


def test_an_edited_class_is_another_model_and_the_same_code_the_same(load):
    first, same, edited = load("a", "one"), load("b", "one"), load("c", "two")
    assert model_identity(first.Model()) == model_identity(same.Model())  # loaded twice: the same code
    assert model_identity(first.Model()) != model_identity(edited.Model())
    assert model_identity(first.Model()).startswith("model:Model#")


def test_a_function_it_holds_and_its_settings_are_part_of_its_identity(load):
    first, edited = load("d", "one"), load("e", "two")
    model = first.Model
    assert model_identity(model(first.generate)) != model_identity(model(edited.generate))
    assert model_identity(model(first.generate)) == model_identity(model(first.generate))
    assert model_identity(model(temperature=0.0)) != model_identity(model(temperature=0.7))


def test_a_declared_version_names_the_model_whatever_its_code(load):
    first, edited = load("f", "one"), load("g", "two")
    a, b = first.Model(), edited.Model()
    a.version = b.version = "3"
    assert model_identity(a) == model_identity(b) == "model:Model@3"
    a.name = b.name = "my-model"
    assert model_identity(a) == model_identity(b) == "model:my-model@3"
    b.version = 4
    assert model_identity(b) == "model:my-model@4"


def test_a_model_with_no_source_to_read_has_no_identity():
    scope: dict = {}
    exec(textwrap.dedent("""
        class Typed:
            async def complete(self, request):
                return None
    """), scope)
    assert model_identity(scope["Typed"]()) is None
