"""Methods that answer a task over documents, by name: R3CON, its ablations and the baselines (r3con.baselines).

The eval harness runs any of them the same way, with the same client, accounting and artifacts.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .config import Settings
from .corpus.documents import Document
from .errors import ConfigError
from .results import MethodFn, MethodOutcome


def _r3con_variant(**changes: Any) -> MethodFn:
    async def method(task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path) -> MethodOutcome:
        from .pipeline.method import run

        result = await run(task, documents, dataclasses.replace(settings, out_dir=run_dir, **changes))
        return MethodOutcome(answer=result.answer, usage=result.usage, by_stage=result.by_stage,
                             capped=result.capped, degraded=result.degraded, run_dir=result.run_dir,
                             model=result.model or None)

    return method


_METHODS: dict[str, MethodFn] = {
    "r3con": _r3con_variant(),
    "r3con-rounds0": _r3con_variant(rounds=0),
    "r3con-rounds1": _r3con_variant(rounds=1),
    "r3con-rounds3": _r3con_variant(rounds=3),
    "r3con-nostruct": _r3con_variant(structuring=False),
    "r3con-direct": _r3con_variant(reasoning="direct"),
}


_DESCRIPTIONS: dict[str, str] = {
    "r3con": "R3CON: relevance rounds (2), schema, per-document population, coding agent over the records",
    "r3con-rounds0": "R3CON ablation: no relevance notes (schema from the task alone), then population and the agent",
    "r3con-rounds1": "R3CON ablation: one relevance round (no cross-document re-reading)",
    "r3con-rounds3": "R3CON ablation: three relevance rounds",
    "r3con-nostruct": "R3CON ablation: no structuring; the coding agent works from the notes alone",
    "r3con-direct": "R3CON ablation: direct reasoning over notes and records in one call instead of the coding agent",
}


def register(name: str, fn: MethodFn, description: str = "") -> None:
    """Make a method available to `run_method` and `r3con eval run --method NAME`."""
    _METHODS[name] = fn
    if description:
        _DESCRIPTIONS[name] = description


def _all_methods() -> dict[str, MethodFn]:
    from .baselines import BASELINES  # imported here: the registry loads them when asked

    return {**BASELINES, **_METHODS}


NEEDS: Mapping[str, tuple[str, str]] = {  # method: (module it imports, the extra that installs it)
    "hipporag": ("igraph", "graph"), "linearrag": ("igraph", "graph"),
}


def check_extras(names: Sequence[str]) -> None:
    """ConfigError before any work when a method needs an optional extra that is not installed."""
    import importlib.util

    for name in names:
        module, extra = NEEDS.get(name, ("", ""))
        if module and importlib.util.find_spec(module) is None:
            raise ConfigError(f"the {name} method needs {module}, which is not installed: "
                              f"pip install 'r3con[{extra}]' (or leave {name} out of --method)")


def available_methods() -> list[str]:
    return sorted(_all_methods())


def describe_methods() -> dict[str, str]:
    """Every method's name and one line on what it does, sorted by name."""
    from .baselines import DESCRIPTIONS

    described = {**DESCRIPTIONS, **_DESCRIPTIONS}
    return {name: described.get(name, "") for name in available_methods()}


async def run_method(
    name: str, task: str, documents: tuple[Document, ...], settings: Settings, run_dir: Path
) -> MethodOutcome:
    """Run the method `name`; raises ConfigError for an unknown name."""
    try:
        fn = _all_methods()[name]
    except KeyError:
        raise ConfigError(f"unknown method {name!r}; choose one of {', '.join(available_methods())}") from None
    return await fn(task, documents, settings, run_dir)


def method_options(name: str) -> dict[str, tuple[str, Any]]:
    """The options `--option` accepts for method `name`: field -> (kind, default); empty for R3CON's."""
    return {field: (_kind(hint), default) for field, (hint, default) in _option_fields(name).items()}


def _option_fields(name: str) -> dict[str, tuple[Any, Any]]:
    from .baselines import OPTIONS

    options = OPTIONS.get(name)
    if options is None:
        return {}
    hints = typing.get_type_hints(options)
    return {f.name: (hints[f.name], f.default) for f in dataclasses.fields(options)}


def _kind(hint: Any) -> str:
    if typing.get_origin(hint) is typing.Literal:
        return "one of " + "|".join(str(a) for a in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        return "comma-separated list"
    return str(getattr(hint, "__name__", hint))


def _convert(method: str, key: str, hint: Any, text: str) -> Any:
    """`text` as a value of the option's type; ConfigError naming the type when it is not one."""
    try:
        if typing.get_origin(hint) is typing.Literal:
            allowed = {str(a): a for a in typing.get_args(hint)}
            if text not in allowed:
                raise ValueError(text)
            return allowed[text]
        if typing.get_origin(hint) is tuple:
            return tuple(part.strip() for part in text.split(",") if part.strip())
        if hint is bool:
            lowered = text.strip().lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return lowered in ("true", "1", "yes")
        if hint in (int, float):
            return hint(text)
        return text
    except ValueError:
        raise ConfigError(f"--option {key}={text}: {method}'s {key} takes {_article(_kind(hint))}") from None


def _article(kind: str) -> str:
    return kind if kind.startswith(("one of", "comma")) else ("an " if kind[0] in "aeiou" else "a ") + kind + " value"


def configured_methods(names: Sequence[str], values: Sequence[str]) -> dict[str, MethodFn]:
    """Each of `names` with the `--option` values that apply to it (KEY=VALUE for every named method,
    METHOD.KEY=VALUE for one), validated against the method's `Options`; a ConfigError lists the valid ones."""
    from .baselines import FACTORIES, OPTIONS

    parsed: list[tuple[str | None, str, str]] = []  # (method or None for all, field, value)
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--option takes KEY=VALUE (e.g. --option top_k=32), not {value!r}")
        target, dot, field = key.strip().rpartition(".")
        if dot and target not in names:
            raise ConfigError(f"--option {value}: {target!r} is not among the methods run ({', '.join(names)})")
        parsed.append((target if dot else None, field, text))
    out: dict[str, MethodFn] = {}
    for name in names:
        accepted = method_options(name)
        hints = _option_fields(name)
        changes: dict[str, Any] = {}
        for scope, field, text in parsed:
            if scope not in (None, name):
                continue
            if field not in accepted:
                valid = ", ".join(f"{k} ({kind}, default {default!r})" for k, (kind, default) in accepted.items())
                raise ConfigError(f"--option {field}: {name} has no such option; "
                                  + (f"valid: {valid}" if valid else f"{name} takes no options"))
            changes[field] = _convert(name, field, hints[field][0], text)
        fn = _all_methods()[name]
        out[name] = FACTORIES[name](dataclasses.replace(OPTIONS[name](), **changes)) if changes else fn
    return out
