"""The code's shape, measured from its AST (issue 51): short parameter lists, short functions, small modules,
folders a reader takes in at a glance, and no measurement narrated in a comment or docstring.

Each test names what breaks its limit, file and line, so the message says what to fix. Import cycles and
private imports across packages are tests/test_layers.py's.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "r3con"

MAX_PARAMETERS = 9  # a function with more is missing an object that holds them
MANY_PARAMETERS_ALLOWED = 3  # functions in src/ that may still take MAX_PARAMETERS + 1 or more
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600
MAX_FOLDER_MODULES = 12
FOLDERS_OF_MANY = {"baselines"}  # one module a method: the folder is the list of methods
MAX_APP_LINES = 300  # cli/app.py only parses and prints

LONG_FUNCTIONS: dict[str, str] = {}
"""Functions allowed over MAX_FUNCTION_LINES ("path/from/src.py::Qualified.name" -> why), two at most; each must
say in its docstring why it is one function."""

MEASUREMENT = re.compile(r"""
    \b\d[\d,.]*\s?(?:[KMGT]iB|[KMGT]B)\b                  # 93 MiB, 25.9 MB, 4 GiB
  | \b\d[\d,.]*\s?(?:B|bytes)\s+(?:a|an|per|each)\b       # 72 B an account, 16 bytes a record
  | \b\d[\d,.]*\s?(?:ms|µs|us)\b[^.;]{0,30}\b(?:a|per)\s+(?:call|request|document|part|file|note|round)\b
  | \bms\s+a\s+call\b
  | \btracemalloc\s+at\b                                    # "tracemalloc at 40,000 files"
  | \b(?:tens|hundreds|a\s+few)\s+of\s+[KMG]i?B\b           # "tens of MB of dicts"
""", re.X | re.I)
"""A figure measured once, in a comment or docstring: it goes to bench/README.md or docs/scale.md with the
command that reproduces it, and the comment keeps the reason."""

NOT_MEASUREMENTS = {
    ("config.py", "1 MiB + 64 bytes per max_tokens"): "a default's rule, documented in docs/resilience.md",
    ("llm/transport/client.py", "at most 6 bytes a character"): "what JSON's \\uXXXX escape takes, not a measurement",
    ("llm/transport/client.py", "else 1 MiB plus 64 bytes"): "the same default's rule",
    ("llm/transport/batch.py", "input files up to 200 MB"): "the provider's documented limit",
    ("sandbox/_process.py", "64 MB of address space per thread arena"): "glibc's documented reservation",
}
"""Lines the pattern matches that state a rule or someone else's documented limit (path from src/r3con, phrase)."""


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method with its qualified name."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{prefix}{child.name}", child
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Its parameters, *args and **kwargs one each, self and cls not counted."""
    a = node.args
    count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    first = (a.posonlyargs + a.args)[:1]
    return count - (1 if first and first[0].arg in ("self", "cls") else 0)


def _trees() -> Iterator[tuple[Path, ast.Module]]:
    for path in _modules():
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_few_functions_take_ten_or_more_parameters():
    many = [f"{_name(path)}:{node.lineno} {qual} ({_parameters(node)})"
            for path, tree in _trees() for qual, node in _functions(tree) if _parameters(node) > MAX_PARAMETERS]
    assert len(many) <= MANY_PARAMETERS_ALLOWED, (
        f"{len(many)} functions take more than {MAX_PARAMETERS} parameters (at most {MANY_PARAMETERS_ALLOWED} may): "
        "group them into the object they belong to\n" + "\n".join(sorted(many)))


def test_functions_fit_on_a_screen():
    assert len(LONG_FUNCTIONS) <= 2, "at most two functions may be long"
    long, allowed = [], set()
    for path, tree in _trees():
        for qual, node in _functions(tree):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            key = f"{_name(path)}::{qual}"
            if key in LONG_FUNCTIONS:
                allowed.add(key)
                assert ast.get_docstring(node), f"{key} is allowed to be long: its docstring must say why"
            elif lines > MAX_FUNCTION_LINES:
                long.append(f"{_name(path)}:{node.lineno} {qual} ({lines} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(sorted(long))
    assert allowed == set(LONG_FUNCTIONS), f"allowed but not found: {sorted(set(LONG_FUNCTIONS) - allowed)}"


def test_modules_are_short():
    big = [f"{_name(p)} ({n} lines)" for p in _modules() if (n := len(p.read_text(encoding="utf-8").splitlines()))
           > MAX_MODULE_LINES]
    assert not big, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(big)


def test_the_cli_app_only_parses_and_prints():
    lines = len((SRC / "cli" / "app.py").read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_APP_LINES, f"cli/app.py is {lines} lines (at most {MAX_APP_LINES}): move library work out"


def test_folders_are_taken_in_at_a_glance():
    counts = Counter(p.parent for p in _modules())
    assert counts[SRC] <= MAX_FOLDER_MODULES, f"the package root holds {counts[SRC]} modules: group them"
    crowded = [f"{folder.relative_to(SRC.parent).as_posix()}/ ({n} modules)" for folder, n in sorted(counts.items())
               if n > MAX_FOLDER_MODULES and folder.name not in FOLDERS_OF_MANY]
    assert not crowded, f"folders over {MAX_FOLDER_MODULES} modules:\n" + "\n".join(crowded)


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """Each comment, and each line of each string standing as a statement (docstrings), with its line."""
    text = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for offset, line in enumerate(node.value.value.splitlines()):
                yield node.lineno + offset, line


def _allowed(name: str, line: str) -> bool:
    return any(name == path and phrase in line for path, phrase in NOT_MEASUREMENTS)


def test_no_comment_narrates_a_measurement():
    found = [f"{_name(p)}:{n}: {line.strip()[:120]}" for p in _modules() for n, line in _prose(p)
             if MEASUREMENT.search(line) and not _allowed(_name(p), line)]
    assert not found, ("comments and docstrings quoting a measurement (keep the reason; the figure goes to "
                       "bench/README.md or docs/scale.md):\n" + "\n".join(found))


def test_the_measurement_pattern_tells_figures_from_reasons():
    figures = ["72 B an account, tracemalloc at 40,000 files", "93 MiB above where it was, not 106",
               "at D = 100,000 it took 4 GiB", "+2.3 ms of CPU a call", "16 bytes a record", "tens of MB of dicts"]
    reasons = ["held in an array beside the parts' places", "a 64-bit int a key", "bytes a reply may hold",
               "D = 100,000 documents", "one word a note"]
    assert all(MEASUREMENT.search(text) for text in figures)
    assert not any(MEASUREMENT.search(text) for text in reasons)
