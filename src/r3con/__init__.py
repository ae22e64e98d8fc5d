"""r3con: answers questions whose evidence is scattered across large document collections (R3CON)."""

from __future__ import annotations

from ._version import __version__
from .config import Settings  # noqa: E402
from .corpus import Corpus, Document, documents_from_texts, load_corpus, load_documents, split_documents  # noqa: E402
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
    RunFailed,
    SandboxError,
)
from .evidence import Evidence  # noqa: E402
from .inputs import Inputs  # noqa: E402
from .pipeline import RunResult, run  # noqa: E402
from .results import Failure  # noqa: E402

__all__ = [
    "BudgetExceeded",
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
    "OutputError",
    "ProviderError",
    "R3conError",
    "RunFailed",
    "RunResult",
    "SandboxError",
    "Settings",
    "__version__",
    "documents_from_texts",
    "load_corpus",
    "load_documents",
    "run",
    "split_documents",
]
