"""Stage 2a, schema proposal: the model designs a JSON Schema for what the answer needs.

The schema is a validated subset of JSON Schema: an object whose top-level properties are arrays of
records (objects with properties), so that it can drive constrained decoding in population.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from ..errors import OutputError
from ..llm.json_reply import NoJSON, extract_json
from ..llm.replies import reply_text
from ..llm.types import LLM, ChatRequest, Message
from ..prompts.render import render
from .messages import reply_excerpt

STAGE = "schema"
SOURCE_FIELDS = ("_doc", "_part", "_title", "_id", "_passage", "_span", "_match", "_mismatch", "_ungrounded")  # population adds these


class SchemaProblem(ValueError):
    """The proposed schema is not of the required shape; the message is shown to the model."""


@dataclass(frozen=True)
class SchemaAttempt:
    reply: str
    schema: Mapping[str, Any] | None
    error: str | None


@dataclass(frozen=True)
class SchemaResult:
    schema: Mapping[str, Any]
    attempts: tuple[SchemaAttempt, ...]

    @property
    def tables(self) -> tuple[str, ...]:
        return tuple(self.schema["properties"])


def validate_schema(schema: Any) -> dict[str, Any]:
    """Check the subset rules and return a normalised copy (every table required); raise SchemaProblem."""
    if not isinstance(schema, dict):
        raise SchemaProblem("the reply is not a JSON object")
    if "properties" not in schema and isinstance(schema.get("schema"), dict):
        schema = schema["schema"]  # a wrapper like {"name": ..., "schema": {...}}
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SchemaProblem(f"invalid JSON Schema at {'/'.join(map(str, exc.path)) or 'top level'}: {exc.message}") from exc
    if schema.get("type") != "object":
        raise SchemaProblem('the top level must have "type": "object"')
    tables = schema.get("properties")
    if not isinstance(tables, dict) or not tables:
        raise SchemaProblem('the top level needs "properties" with at least one table')
    for name, table in tables.items():
        if not isinstance(table, dict) or table.get("type") != "array":
            raise SchemaProblem(f'table {name!r} must be {{"type": "array", "items": {{...}}}}')
        items = table.get("items")
        if not isinstance(items, dict) or items.get("type") != "object":
            raise SchemaProblem(f'the items of table {name!r} must be objects ("type": "object")')
        fields = items.get("properties")
        if not isinstance(fields, dict) or not fields:
            raise SchemaProblem(f'the records of table {name!r} need "properties" with at least one field')
        clash = [f for f in fields if f in SOURCE_FIELDS]
        if clash:
            raise SchemaProblem(f"field names {clash} are reserved for the source document and its passage; rename them")
    normalised = copy.deepcopy(schema)
    normalised["required"] = sorted(set(normalised.get("required", [])) | set(tables))
    return normalised


async def propose_schema(
    llm: LLM, task: str, notes: str, *, max_attempts: int = 3, temperature: float | None = None
) -> SchemaResult:
    """Ask for a schema; on an invalid one, re-ask with the validation error, up to `max_attempts`.

    A re-ask is the first prompt and the error with the start of the failed reply (`reply_excerpt`),
    never the whole failed reply: a cut one may be thousands of tokens, and each re-ask would grow
    the prompt by it until it overflows the window."""
    prompt = render("schema", task=task, notes=notes)
    messages: list[Message] = [Message("user", prompt.text)]
    attempts: list[SchemaAttempt] = []
    for _ in range(max_attempts):
        completion = await llm.complete(
            ChatRequest(messages=tuple(messages), stage=STAGE, temperature=temperature,
                        prompt_name=prompt.name, prompt_hash=prompt.hash)
        )
        reply = reply_text(completion)
        try:
            value, _ = extract_json(reply)
            schema = validate_schema(value)
        except (NoJSON, SchemaProblem) as exc:
            attempts.append(SchemaAttempt(reply=reply, schema=None, error=str(exc)))
            retry = render("schema_retry", error=str(exc), excerpt=reply_excerpt(reply))
            messages = [messages[0], Message("user", retry.text)]  # the error, not the failed reply: the prompt stays its size
            continue
        attempts.append(SchemaAttempt(reply=reply, schema=schema, error=None))
        return SchemaResult(schema=schema, attempts=tuple(attempts))
    last = attempts[-1].error if attempts else "no attempt"
    raise OutputError(f"the model proposed no usable schema in {max_attempts} attempts (last problem: {last})")


def schema_text(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, indent=1, ensure_ascii=False)
