import json

import pytest

from r3con.errors import OutputError
from r3con.stages.schema import SchemaProblem, propose_schema, validate_schema

from ..fakes import SIMPLE_SCHEMA, ScriptedLLM, schema_reply


def test_valid_schema_is_normalised_with_every_table_required():
    out = validate_schema(SIMPLE_SCHEMA)
    assert out["required"] == ["people"]
    assert "required" not in SIMPLE_SCHEMA  # the input is not modified


@pytest.mark.parametrize(
    "schema, problem",
    [
        ({"type": "array", "items": {}}, "top level"),
        ({"type": "object", "properties": {}}, "at least one table"),
        ({"type": "object", "properties": {"t": {"type": "string"}}}, "must be"),
        ({"type": "object", "properties": {"t": {"type": "array", "items": {"type": "string"}}}}, "must be objects"),
        ({"type": "object", "properties": {"t": {"type": "array", "items": {"type": "object"}}}}, "at least one field"),
        ({"type": "object", "properties": {"t": {"type": "array", "items": {"type": "object", "properties": {"_doc": {"type": "integer"}}}}}}, "reserved"),
        ({"type": "object", "properties": {"t": {"type": 12}}}, "invalid JSON Schema"),
    ],
)
def test_invalid_schemas_are_rejected_with_a_reason(schema, problem):
    with pytest.raises(SchemaProblem, match=problem):
        validate_schema(schema)


async def test_reasks_with_the_validation_error_then_accepts():
    replies = iter(["Here you go: {\"type\": \"array\"}", schema_reply()])
    llm = ScriptedLLM({"schema": lambda r: next(replies)})
    result = await propose_schema(llm, "task", "<notes/>", max_attempts=3)
    assert result.tables == ("people",)
    assert [a.error is None for a in result.attempts] == [False, True]
    second = llm.history[1]
    assert [m.role for m in second.messages] == ["user", "user"], "the first prompt and the error, no failed reply"
    assert "top level must have" in second.messages[-1].content
    assert 'Here you go: {"type": "array"}' in second.messages[-1].content, "the failed reply's start is quoted"


async def test_reasks_stay_the_size_of_the_first_prompt_however_long_the_failed_replies():
    llm = ScriptedLLM({"schema": lambda r: "rambling noise " * 2000})
    with pytest.raises(OutputError, match="3 attempts"):
        await propose_schema(llm, "task", "<notes/>", max_attempts=3)
    sizes = [sum(len(m.content) for m in r.messages) for r in llm.history]
    assert sizes[1] == sizes[2] and sizes[1] < sizes[0] + 1000, sizes


async def test_gives_up_after_the_bound():
    llm = ScriptedLLM({"schema": lambda r: "no json here"})
    with pytest.raises(OutputError, match="2 attempts"):
        await propose_schema(llm, "task", "<notes/>", max_attempts=2)
    assert len(llm.history) == 2


async def test_schema_prompt_carries_task_and_notes():
    llm = ScriptedLLM({"schema": lambda r: json.dumps(SIMPLE_SCHEMA)})
    await propose_schema(llm, "How old is Ann?", "<notes>\nAnn is 4\n</notes>")
    text = llm.history[0].messages[0].content
    assert "How old is Ann?" in text and "Ann is 4" in text
