"""The one exception hierarchy of r3con.

    R3conError                 base; `exit_code` is what the CLI exits with
    ├── ConfigError            the user must change configuration (flags, env vars)   exit 2
    │   └── EndpointUnreachable  no server answers at the base URL                   exit 2
    ├── InputError             the documents, paths or data files are unusable         exit 2
    │   └── EncryptedDocument    a PDF that needs a password (none given, or not its own)
    ├── ProviderError          the LLM endpoint answered with an error (status, body)  exit 1
    │   └── ContextTooLong       the request did not fit the model's context window
    ├── OutputError            the model's output stayed unusable after re-asking      exit 1
    ├── BudgetExceeded         the run would spend more than --max-cost allows         exit 1
    ├── SandboxError           the code sandbox could not be started as required       exit 1
    ├── DiskFull               no space left to write the run folder (or the cache)    exit 1
    ├── RunFailed              a stage failed in a way that makes the answer meaningless exit 1
    └── RunCancelled           the run was cancelled (`Run.cancel`); its folder resumes  exit 130

Every message is one line that says what to do. Third-party exceptions are translated at one boundary
(the LLM client, the corpus readers, the sandbox) with `raise ... from exc`.

An exception carries what its constructor was given; nothing is attached to one that was caught
(tests/test_layers.py checks), with one exception: the output guard adds the usage of its re-asks to an
endpoint error passing through it (llm/layers/output.py), for the ledger. A run that raises re-raises the very exception that ended it, so `except ProviderError` (or
`asyncio.CancelledError`, for which asyncio compares types) catches what it always did; where the run left
off (its folder, stage and report, for `--resume`) is not put on the exception but handed to
`run(on_end=...)` as a `RunEnd`. Copying or wrapping the error instead would change its type for those
who catch it, and a CancelledError or KeyboardInterrupt must stay what asyncio raised.
"""

from __future__ import annotations

from pathlib import Path


class R3conError(Exception):
    """Base of every error r3con raises on purpose."""

    exit_code = 1

    def __init__(self, *args: object, usage: object = None):
        super().__init__(*args)
        self.usage = usage  # the Usage of calls made before the error (for the ledger), if any


class ConfigError(R3conError):
    """Configuration is missing or wrong; the message names the flag or variable to set."""

    exit_code = 2


class EndpointUnreachable(ConfigError):
    """No OpenAI-compatible server answered at the configured base URL."""


class InputError(R3conError):
    """Documents or other inputs cannot be used as given."""

    exit_code = 2


class EncryptedDocument(InputError):
    """A document is encrypted and no password given opens it."""


class ProviderError(R3conError):
    """The endpoint answered a request with an error."""

    def __init__(self, message: str, *, status: int | None = None, body: str = "", endpoint: str = "",
                 retry_after: float | None = None, proxy: str | None = None, usage: object = None):
        super().__init__(message, usage=usage)
        self.status = status
        self.body = body
        self.endpoint = endpoint
        self.retry_after = retry_after  # seconds the endpoint asked us to wait (Retry-After), if it said
        self.proxy = proxy  # the proxy the connection went through and failed at, if any


class ContextTooLong(ProviderError):
    """The endpoint refused a request as longer than the model's context window (HTTP 400)."""


class OutputError(R3conError):
    """The model's output could not be used, even after re-asking."""


class BudgetExceeded(R3conError):
    """Continuing would spend more than the configured maximum cost."""


class SandboxError(R3conError):
    """The code sandbox could not be started with the required isolation."""


class DiskFull(R3conError):
    """The disk ran out of space while r3con wrote the run folder or its cache."""

    def __init__(self, message: str, *, run_dir: Path | None = None, stage: str | None = None):
        super().__init__(message)
        self.run_dir = run_dir
        self.stage = stage


class RunFailed(R3conError):
    """The run cannot produce a meaningful answer."""


class RunCancelled(R3conError):
    """The run was cancelled (`Run.cancel()`); its folder keeps what was done and resumes (`r3con.resume`)."""

    exit_code = 130

    def __init__(self, message: str, *, run_dir: Path | None = None, stage: str | None = None):
        super().__init__(message)
        self.run_dir = run_dir
        self.stage = stage
