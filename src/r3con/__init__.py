"""r3con: answers questions whose evidence is scattered across large document collections (R3CON)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .config import Settings  # noqa: E402
from .corpus.documents import (  # noqa: E402
    Corpus,
    Document,
    documents_from_texts,
    load_corpus,
    load_documents,
    split_documents,
)
from .corpus.inputs import Inputs  # noqa: E402
from .errors import (  # noqa: E402
    BudgetExceeded,
    ConfigError,
    ContextTooLong,
    DiskFull,
    EndpointUnreachable,
    InputError,
    OutputError,
    ProviderError,
    R3conError,
    RunCancelled,
    RunFailed,
    SandboxError,
)

if TYPE_CHECKING:
    from .evidence.citations import Evidence
    from .llm.types import LLM, ChatRequest, Completion, Message, Usage
    from .pipeline import events
    from .pipeline.method import RunResult, run
    from .results import Failure, RunEnd
    from .runs import Plan, Run, ask, resume, start

# Imported on first use: the pipeline (the LLM client, the stages) is most of what importing r3con costs,
# and `r3con` on the command line must be able to catch Ctrl-C (its main() does) before that is loaded.
_LAZY = {"Evidence": "evidence.citations", "RunResult": "pipeline.method", "run": "pipeline.method", "Failure": "results",
         "RunEnd": "results", "LLM": "llm.types", "ChatRequest": "llm.types", "Completion": "llm.types",
         "Message": "llm.types", "Usage": "llm.types", "Run": "runs", "Plan": "runs", "start": "runs",
         "resume": "runs", "ask": "runs", "events": "pipeline"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module = importlib.import_module(f".{_LAZY[name]}", __name__)
        value = getattr(module, name) if name != "events" else importlib.import_module(".pipeline.events", __name__)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'r3con' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, the lazily imported ones included (editors and `dir(r3con)` list them)."""
    return sorted({*globals(), *__all__})

__all__ = [
    "BudgetExceeded",
    "ChatRequest",
    "Completion",
    "ConfigError",
    "ContextTooLong",
    "Corpus",
    "DiskFull",
    "Document",
    "EndpointUnreachable",
    "Evidence",
    "Failure",
    "InputError",
    "Inputs",
    "LLM",
    "Message",
    "OutputError",
    "Plan",
    "ProviderError",
    "R3conError",
    "Run",
    "RunCancelled",
    "RunEnd",
    "RunFailed",
    "RunResult",
    "SandboxError",
    "Settings",
    "Usage",
    "__version__",
    "ask",
    "documents_from_texts",
    "events",
    "load_corpus",
    "load_documents",
    "resume",
    "run",
    "split_documents",
    "start",
]
