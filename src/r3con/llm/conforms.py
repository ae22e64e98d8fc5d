"""Whether a JSON value conforms to a response schema, quickly, for the schemas r3con's stages ask with.

`jsonschema` is exact for every keyword of draft 2020-12, and slow for being so (it resolves references and
walks every keyword through its registry on each value). The schemas of r3con's stages use a handful of
keywords: `type`, `properties`, `required`, `items`, `additionalProperties`, `enum` and the annotations
(`description`, `title`...). `conforms` checks those itself, with draft 2020-12's meaning, and hands any schema
that uses another keyword, anywhere, to `jsonschema` whole: the answer is always `jsonschema`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema

# keywords that never decide validity (annotations)
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated", "readOnly",
                          "writeOnly", "format", "$schema"})
_CHECKED = frozenset({"type", "properties", "required", "items", "additionalProperties"}) | _ANNOTATIONS
# whether a schema is `_simple`, by the schema object a stage asks with (the same one for all its calls); the
# schema is held with its answer, so that its id is not another's while it is kept
_KNOWN: dict[int, tuple[Any, bool]] = {}
_KEPT = 256
_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})


def conforms(schema: Mapping[str, Any], value: Any) -> bool:
    """Whether `value` (parsed JSON) is valid against `schema` (draft 2020-12), as `jsonschema` says."""
    known = _KNOWN.get(id(schema))
    if known is None or known[0] is not schema:
        if len(_KNOWN) >= _KEPT:
            _KNOWN.clear()
        known = _KNOWN[id(schema)] = (schema, _simple(schema))
    if known[1]:
        return _valid(schema, value)
    return bool(jsonschema.Draft202012Validator(dict(schema)).is_valid(value))


def _simple(schema: Any) -> bool:
    """Whether `schema` uses only the keywords checked here, in their plain forms, at every level."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, Mapping) or not _CHECKED.issuperset(schema):
        return False
    kind, properties, required = schema.get("type", "object"), schema.get("properties", {}), schema.get("required", [])
    kinds = [kind] if isinstance(kind, str) else kind
    return (isinstance(kinds, list) and bool(kinds) and all(isinstance(k, str) and k in _TYPES for k in kinds)
            and isinstance(properties, Mapping) and all(_simple(sub) for sub in properties.values())
            and isinstance(required, list) and all(isinstance(name, str) for name in required)
            and _simple(schema.get("additionalProperties", True)) and _simple(schema.get("items", True)))


def _valid(schema: Any, value: Any) -> bool:
    """`value` against a `_simple` schema."""
    if isinstance(schema, bool):
        return schema
    if "type" in schema and not _typed(schema["type"], value):
        return False
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        if any(name not in value for name in schema.get("required", ())):
            return False
        extra = schema.get("additionalProperties", True)
        for name, held in value.items():
            sub = properties.get(name, extra)
            if sub is not True and not _valid(sub, held):
                return False
        return True
    if isinstance(value, list):
        items = schema.get("items", True)
        return items is True or all(_valid(items, item) for item in value)
    return True


def _typed(expected: str | list[str], value: Any) -> bool:
    if isinstance(expected, str):
        return _is(expected, value)
    return any(_is(name, value) for name in expected)


def _is(name: str, value: Any) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return name == "number" or isinstance(value, int) or value.is_integer()
