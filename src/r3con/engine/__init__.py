"""Where a run's per-document calls are sent from: this process (`local`), or Ray workers (`--engine ray`).

The stages stay the same code whichever engine runs them: they call the LLM seam, and with Ray the
bottom of the run's stack is `Remote`, a pool of Ray actors that each hold r3con's own LLM stack built
from the run's settings (retries, output checks, overflow handling, the cache, a pool with document
affinity). Every call about one document part goes to one worker (and so to one endpoint of that
worker's pool) across rounds and stages. The run folder, the record of every call, the usage and the
cost stay on the driver, which adds the engine, the cluster's size and what each worker did to the
manifest. A worker that dies is restarted by Ray and its calls retried there; when it cannot come back,
its documents go to the next worker.

The workers also make the notes choices of the calls (`notes.Selects`: a relevance round's reads, and
population's own selections when the final notes do not all fit), which on one driver cost a
millisecond or more a read at 100,000 notes: the notes go into Ray's object store once, each worker
builds its own selector (and BM25 index) over them, and answers batches of reads with the choices by
position; the driver renders each choice's text as its call goes out. Ranked by embeddings, the choices
are made on the driver as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from ..config import Settings
from ..errors import ConfigError
from ..llm import Remote

__all__ = ["Remote", "open_engine"]


@asynccontextmanager
async def open_engine(settings: Settings, log: Path | None = None) -> AsyncIterator[Remote | None]:
    """The workers of `settings.engine`: None for `local` (this process sends the calls), else Ray's, whose own
    messages (a worker that died, a task retried) go to `log`."""
    if settings.engine == "local":
        yield None
        return
    try:
        from . import _ray
    except ImportError as exc:
        raise ConfigError(f"--engine ray needs Ray ({exc.name} is not installed): "
                          "pip install 'r3con[ray]', or drop --engine ray") from exc
    async with _ray.workers(settings, log) as remote:
        yield remote
