"""The package's layers: a module imports only from its own layer or those below (parsed, not imported)."""

import ast
import sys
from pathlib import Path

import r3con

ROOT = Path(r3con.__file__).parent

# lowest first; a top-level module or package of r3con in each
LAYERS = [
    {"errors", "_files", "_json", "tokens", "config", "_prompts", "prompts", "__version__"},
    {"_readers", "_formats", "_walk", "inputs", "corpus", "retrieval", "artifacts", "resume", "evidence", "tables",
     "report"},  # the run report reads a run folder's files; the pipeline writes it at the end of a run
    {"llm", "sandbox", "testing"},
    {"results", "progress", "display", "_fanout"},
    {"stages"},
    {"pipeline", "baselines", "estimate"},
    {"methods", "eval", "demo"},
    {"cli", "__main__", ""},
]


def layer(name: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if name in names)


def top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports(path: Path) -> list[tuple[str, int]]:
    """(imported r3con module, line) for every import outside `if TYPE_CHECKING:` blocks."""
    module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
    package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
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
