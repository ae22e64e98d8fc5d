"""`conforms`: the same answer as jsonschema's draft 2020-12 validator, quickly for the stages' schemas."""

import random

import jsonschema
import pytest

from r3con.llm.conforms import _simple, conforms

TYPES = ["object", "array", "string", "number", "integer", "boolean", "null"]
RECORDS = {"type": "object", "required": ["people"], "properties": {"people": {"type": "array", "items": {
    "type": "object", "required": ["_passage", "name"], "properties": {
        "_passage": {"type": "string", "description": "the sentence"}, "name": {"type": "string"},
        "age": {"type": ["integer", "null"]}}}}}}


def _schema(rng: random.Random, depth: int = 0):
    if rng.random() < 0.08:
        return rng.choice([True, False])
    schema: dict = {}
    if rng.random() < 0.8:
        schema["type"] = rng.choice(TYPES) if rng.random() < 0.7 else rng.sample(TYPES, rng.randint(1, 3))
    if depth < 3 and rng.random() < 0.5:
        schema["properties"] = {k: _schema(rng, depth + 1) for k in rng.sample("abcd", rng.randint(0, 3))}
    if rng.random() < 0.3:
        schema["required"] = rng.sample("abcd", rng.randint(0, 2))
    if depth < 3 and rng.random() < 0.3:
        schema["items"] = _schema(rng, depth + 1)
    if depth < 3 and rng.random() < 0.2:
        schema["additionalProperties"] = _schema(rng, depth + 1)
    if rng.random() < 0.2:
        schema["description"] = "an annotation"
    if rng.random() < 0.05:
        schema["enum"] = [1, "a", None]  # left to jsonschema
    if rng.random() < 0.03:
        schema["minimum"] = 3  # left to jsonschema
    return schema


def _value(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth < 3 and roll < 0.3:
        return {k: _value(rng, depth + 1) for k in rng.sample("abcde", rng.randint(0, 4))}
    if depth < 3 and roll < 0.45:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice([None, True, False, 0, 1, 2.0, 2.5, -3, "s", "", 1e300, float("inf")])


def test_it_answers_as_jsonschema_does_on_random_schemas_and_values():
    rng = random.Random(7)
    simple = 0
    for _ in range(4000):
        schema, value = _schema(rng), _value(rng)
        schema = schema if isinstance(schema, dict) else {"items": schema}
        simple += _simple(schema)
        assert conforms(schema, value) is jsonschema.Draft202012Validator(schema).is_valid(value), (schema, value)
    assert 2000 < simple < 4000  # both paths were taken


@pytest.mark.parametrize("value, ok", [
    ({"people": [{"_passage": "Ann is 3.", "name": "Ann", "age": 3}]}, True),
    ({"people": [{"_passage": "Ann is 3.", "name": "Ann", "age": 3.0}]}, True),  # 3.0 is an integer in JSON Schema
    ({"people": [{"_passage": "Ann is 3.", "name": "Ann", "age": None, "extra": [1]}]}, True),
    ({"people": [{"_passage": "Ann is 3.", "name": "Ann", "age": True}]}, False),  # a boolean is not a number
    ({"people": [{"_passage": "Ann is 3.", "name": "Ann", "age": 3.5}]}, False),
    ({"people": [{"name": "Ann"}]}, False),
    ({"people": {}}, False),
    ({}, False),
    ([], False),
])
def test_a_records_schema(value, ok):
    assert _simple(RECORDS)
    assert conforms(RECORDS, value) is ok


def test_a_schema_with_other_keywords_is_left_to_jsonschema():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}}
    assert not _simple(schema)
    assert conforms(schema, {"n": 4}) and not conforms(schema, {"n": 2})
