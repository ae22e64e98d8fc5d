"""What the LLM cache knows a user's model by, so that an edited model is not served its predecessor's replies.

An HTTP endpoint is known by its URL and the model name it serves. A model given as an object (`llm=` of
`r3con.run`, `model=` of `build_llm`) has no URL, and its name (`--model`, or "custom") stays the same
when its code changes. So its replies are kept in the cache under, in this order:

1. the `version` it declares (an attribute: a string or an integer), with its `name` if it declares one
   (else its class's name): the user says when its replies change;
2. else a digest of its code: the source of its class (and the classes it derives from), and of the
   functions and methods it holds as attributes, with the plain values it holds (strings, numbers, tuples
   of them: what a changed setting changes; a counter it keeps changes the digest too); the
   data those read (weights, files, a client's server) is not in the digest, so a model whose replies
   change with them declares a `version`;
3. else (no source to read: a class typed into an interactive session) nothing: its replies are not
   kept in the cache, and another process asks it again.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

PLAIN = (str, int, float, bool, bytes, type(None))


def model_identity(model: object) -> str | None:
    """The cache's name for `model`'s replies (see the module's docstring), or None: not cached."""
    version = getattr(model, "version", None)
    if isinstance(version, str | int) and not isinstance(version, bool) and str(version):
        name = getattr(model, "name", None)
        return f"model:{name if isinstance(name, str) and name else type(model).__qualname__}@{version}"
    digest = code_digest(model)
    return None if digest is None else f"model:{type(model).__qualname__}#{digest}"


def code_digest(model: object) -> str | None:
    """A digest of `model`'s code and plain values, or None when some of its code has no source to read."""
    parts: list[str] = []
    for cls in type(model).__mro__:
        if cls is object:
            continue
        source = _source(cls)
        if source is None and cls is type(model):
            return None
        parts.append(source or _name(cls))  # a base written in C: its name (its code is the interpreter's)
    for key, value in sorted(_attributes(model).items()):
        held = _held(value)
        if held is None:
            return None
        parts.append(f"{key}={held}")
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _held(value: object) -> str | None:
    """What an attribute adds to the digest: a function's source, a plain value, else its type's name."""
    if inspect.ismethod(value):
        value = value.__func__
    if inspect.isfunction(value):
        return _source(value)
    if isinstance(value, PLAIN) or (isinstance(value, tuple) and all(isinstance(v, PLAIN) for v in value)):
        return repr(value)  # a setting (a path, a temperature); a list or a dict is state, and changes as it is used
    if inspect.isbuiltin(value):
        return _name(value)
    return _name(type(value))  # data the digest does not read (see the module's docstring)


def _attributes(model: object) -> dict[str, Any]:
    held = dict(getattr(model, "__dict__", {}))
    for cls in type(model).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and hasattr(model, slot) and not slot.startswith("__"):
                held.setdefault(slot, getattr(model, slot))
    return held


def _source(thing: Any) -> str | None:
    try:
        return inspect.getsource(thing)
    except (OSError, TypeError):
        return None


def _name(thing: Any) -> str:
    return f"{getattr(thing, '__module__', '')}.{getattr(thing, '__qualname__', type(thing).__qualname__)}"
