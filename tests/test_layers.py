"""The package's layers: a module imports only from its own layer or those below (parsed, not imported)."""

import ast
import sys
from pathlib import Path

import r3con

ROOT = Path(r3con.__file__).parent

# lowest first; a top-level module or package of r3con in each
LAYERS = [
    {"errors", "files", "db", "tokens", "config", "prompts", "_version"},
    {"corpus", "evidence", "notes", "artifacts"},
    {"llm", "engine", "sandbox", "testing"},
    {"results", "display",
     "report"},  # the run report reads a run folder's files (and says costs as the LLM's usage does)
    {"stages"},
    {"pipeline", "baselines"},
    {"methods", "eval", "demo", "runs", "app"},  # app: the browser app, a consumer of runs/
    {"otel", "mcpserver"},  # followers of a run (its events): traces, the MCP server
    {"cli", "__main__", ""},
]


def layer(name: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if name in names)


def top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports(path: Path) -> list[tuple[str, int]]:
    """(imported r3con module, line) for every import: at the top, in functions, and under `if TYPE_CHECKING:`
    (a type a module names is part of what it depends on)."""
    module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
    package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
            names = [f"{target}.{a.name}" for a in node.names] if not node.module or target == "r3con" else [target]
            out += [(name, node.lineno) for name in names if name.startswith("r3con")]
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("r3con")]
    return out


def test_every_module_is_in_a_layer():
    names = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())) and p.name != "__init__.py"}
    assert names <= set().union(*LAYERS), f"put these in a layer: {sorted(names - set().union(*LAYERS))}"


def test_no_module_imports_from_a_layer_above_its_own():
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        own = top(module.removesuffix(".__init__")) if path.name == "__init__.py" else top(module)
        for target, line in imports(path):
            if top(target) != own and layer(top(target)) > layer(own):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    fake = tmp_path / "r3con" / "llm"
    fake.mkdir(parents=True)
    (fake / "bad.py").write_text("from ..stages.relevance import extract_relevance\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path / "r3con")
    assert imports(fake / "bad.py") == [("r3con.stages.relevance", 1)]
    assert layer(top("r3con.stages.relevance")) > layer(top("r3con.llm.bad"))


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")


def _graph() -> dict[str, set[str]]:
    """Each r3con module and the r3con modules it imports (a package's name for its __init__)."""
    modules = {_module(p): p for p in ROOT.rglob("*.py")}

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    return {m: {t for name, _ in imports(p) if (t := known(name)) and t != m} for m, p in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others (Tarjan's components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert cycles(_graph()) == []


def test_the_cycle_check_sees_a_cycle_through_a_lazy_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_another_packages_private_module():
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
        for target, line in imports(path):
            owner, _, name = target.rpartition(".")
            if name.startswith("_") and not name.startswith("__") and owner != package \
                    and not package.startswith(owner + "."):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)


def _exception_names(node: ast.AST) -> list[tuple[str, ast.AST]]:
    """(name, scope) for each exception a scope holds: bound by `except ... as name`, or a parameter
    annotated as an exception (`exc: BaseException`, `error: R3conError`)."""
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [(node.name, node)]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        params = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        return [(a.arg, node) for a in params
                if a.annotation is not None and ast.unparse(a.annotation).endswith(("Exception", "Error"))]
    return []


def attached_to_caught(tree: ast.AST) -> list[int]:
    """Lines that set an attribute on an exception something else raised (`name.x = ...`, `setattr(name,
    ...)`, where `except ... as name` or a parameter `name: SomeError` holds it): an exception carries what
    its constructor was given."""
    lines = []
    for scope in ast.walk(tree):
        for name, body in _exception_names(scope):
            for node in ast.walk(body):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
                if any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == name
                       for target in targets for t in ast.walk(target)):
                    lines.append(node.lineno)
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                        and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == name:
                    lines.append(node.lineno)
    return sorted(set(lines))


# the output guard adds its re-asks' usage to an endpoint error passing through, for the ledger (errors.py)
ATTACHED_ON_PURPOSE = {"llm/layers/output.py": 1}


def test_no_exception_gets_attributes_attached_where_it_is_caught():
    found = {str(path.relative_to(ROOT)): attached_to_caught(ast.parse(path.read_text(encoding="utf-8")))
             for path in sorted(ROOT.rglob("*.py"))}
    wrong = [f"{name}:{lines}" for name, lines in found.items() if len(lines) != ATTACHED_ON_PURPOSE.get(name, 0)]
    assert not wrong, "give the exception's constructor what it carries, or hand it on beside the error: " + \
        ", ".join(wrong)


def test_the_attribute_check_sees_an_attached_attribute():
    code = ("try:\n    pass\nexcept ValueError as exc:\n    exc.run_dir = 1\n    exc.a, exc.b = 1, 2\n"
            "    setattr(exc, 'c', 3)\n    other.d = exc\n    raise\n"
            "def ended(self, exc: BaseException, n: int) -> None:\n    exc.stage = 'x'\n    n.y = 1\n")
    assert attached_to_caught(ast.parse(code)) == [4, 5, 6, 10]
