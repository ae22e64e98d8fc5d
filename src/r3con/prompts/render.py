"""Prompt templates are package data, rendered with strict undefined variables; each has a name and hash."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import jinja2


@dataclass(frozen=True)
class Rendered:
    """A rendered prompt with the template's name and the hash of its source (logged with every call)."""

    text: str
    name: str
    hash: str


def attribute(value: object) -> str:
    """`value` as the text of a double-quoted attribute on one line (the templates' `attr` filter)."""
    return str(value).replace("&", "&amp;").replace('"', "&quot;").replace("\n", " ")


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
        loader=jinja2.FunctionLoader(_source),
    )
    env.filters["attr"] = attribute
    return env


def _source(name: str) -> str:
    return template_source(name)


@cache
def template_source(name: str) -> str:
    return resources.files("r3con.prompts").joinpath(f"{name}.j2").read_text(encoding="utf-8")


def render(name: str, **variables: Any) -> Rendered:
    """Render the template `name` (without `.j2`); a missing variable raises instead of rendering blank."""
    text = _template(_environment(), name).render(**variables).strip()
    return Rendered(text=text, name=name, hash=template_hash(name))


@cache
def _template(env: jinja2.Environment, name: str) -> jinja2.Template:
    """The compiled template `name` of `env`: looked up once, rather than through the environment's cache
    at every call's prompt (a new environment, as after `_environment.cache_clear()`, looks up anew)."""
    return env.get_template(name)


def render_source(source: str, **variables: Any) -> str:
    """Render a template given as text (a user's, e.g. `--judge-prompt`) with the same strict environment."""
    return _environment().from_string(source).render(**variables).strip()


def parse_source(source: str) -> None:
    """Raise jinja2.TemplateSyntaxError if `source` is not a valid template."""
    _environment().parse(source)


@cache
def template_hash(name: str) -> str:
    """The first 12 hex digits of the SHA-256 of the template's source."""
    return hashlib.sha256(template_source(name).encode()).hexdigest()[:12]
