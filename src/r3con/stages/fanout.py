"""The one per-document error boundary: a stage's calls over many documents, where one document may fail.

Only a document's own failure (the endpoint's error for its request, `ProviderError`; or the model's
unusable output for it, `OutputError`) becomes that document's `Failure`, and the stage goes on
without it. Everything else (configuration, `--max-cost`, unusable inputs, our own bugs) is not the
document's fault: it stops the other documents' calls and propagates unchanged, with its own exit
code and message. Stages and baselines both fan out through `fan_out`.
"""

from __future__ import annotations

import asyncio
import errno
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TypeVar

from ..errors import OutputError, ProviderError, R3conError, RunFailed
from ..results import Failure

T = TypeVar("T")
R = TypeVar("R")

DOCUMENT_ERRORS = (ProviderError, OutputError)  # the failures one document can have on its own
_WORDS = 200  # characters of the server's own words kept in a cause


async def fan_out(
    stage: str, items: Sequence[T], fn: Callable[[T], Awaitable[R]], *, key: Callable[[T], str],
    limit: int | None = None, context: str = "", chains: int | None = None,
) -> list[R | Failure]:
    """`fn(item)` for every item, at most `limit` at once (None: all; the LLM stack's concurrency layer
    bounds the requests, and a batch needs them issued together); results in the order of `items`.

    A document's own failure becomes a `Failure` (labelled with `key(item)`; `context`, e.g. "round 2",
    prefixes its error) in its place. Any other r3con error (a budget stop, a configuration error)
    stops the stage: no item starts after it, the calls already under way finish (they are paid for,
    and the cache keeps them for a rerun), then the first such error is raised as it was. Our own bugs
    cancel the other items at once and propagate unchanged. With a `limit`, `limit` workers take the
    items in order, so what is held at once (tasks, prompts) follows the limit, not the number of items.
    With `chains` (instead), that many workers each take one contiguous run of the items, one at a time:
    each item goes out as the one before it in its run returns, to the server slot that holds its prefix.
    """
    stops: list[R3conError] = []

    async def one(item: T) -> R | Failure | None:
        try:
            return await fn(item)
        except DOCUMENT_ERRORS as exc:
            error = f"{context}: {exc}" if context else str(exc)
            return Failure(stage=stage, doc=key(item), error=error, cause=cause_of(exc))
        except R3conError as exc:  # not this document's failure: the stage stops once the others are back
            stops.append(exc)
            return None

    results: list[R | Failure | None] = [None] * len(items)
    queue = iter(enumerate(items))

    async def worker(queue: Iterator[tuple[int, T]] = queue) -> None:
        for i, item in queue:  # one iterator shared by the workers (or a chain's own): each item taken once, in order
            if stops:  # the stage is stopping: do not start another item
                return
            results[i] = await one(item)

    async def each(i: int, item: T) -> None:
        results[i] = await one(item)

    error: BaseException | None = None
    try:
        async with asyncio.TaskGroup() as group:
            if chains:
                ends = [len(items) * j // chains for j in range(chains + 1)]
                for start, end in zip(ends, ends[1:], strict=False):
                    group.create_task(worker(iter(zip(range(start, end), items[start:end], strict=True))))
            elif limit:
                for _ in range(min(limit, len(items))):
                    group.create_task(worker())
            else:
                for i, item in enumerate(items):
                    group.create_task(each(i, item))
    except BaseExceptionGroup as failed:
        error = _first(failed)
    if error is None and stops:
        error = stops[0]
    if error is not None:
        raise error  # outside the handler, so the error keeps its own context
    return [result for result in results if result is not None]


def _first(group: BaseExceptionGroup) -> BaseException:
    """The first error of a task group that is not a cancellation (the one that stopped the others)."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first(exc)
        if not isinstance(exc, asyncio.CancelledError):
            return exc
    return group.exceptions[0]


def cause_of(exc: BaseException) -> str:
    """What went wrong, in words a user can act on: the HTTP status and the server's own words,
    "connection refused at URL", "timed out", or the error's message."""
    if isinstance(exc, ProviderError):
        where = f" at {exc.endpoint}" if exc.endpoint else ""
        if exc.status is not None:
            words = server_words(exc.body)
            said = f"HTTP {exc.status} from the endpoint: {words}" if words else f"HTTP {exc.status} from the endpoint{where}"
            if exc.retry_after is not None and exc.retry_after > 60:  # a long wait the call did not sit through
                said += f", asking to wait {exc.retry_after:g} s (Retry-After)"
            return said
        for link in _chain(exc):
            if isinstance(link, ConnectionRefusedError) or getattr(link, "errno", None) == errno.ECONNREFUSED \
                    or isinstance(getattr(link, "os_error", None), ConnectionRefusedError):
                return f"connection refused{where}"
        for link in _chain(exc):
            if isinstance(link, TimeoutError) or "Timeout" in type(link).__name__:
                after = re.search(r"after ([\d.]+) ?s\b", str(exc))
                return f"timed out{' after ' + after.group(1) + ' s' if after else ''}{where}"
        for link in _chain(exc):
            name = type(link).__name__
            if isinstance(link, ConnectionError) or "Disconnected" in name or "RemoteProtocol" in name:
                return f"the connection was closed without a reply{where}"
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, DOCUMENT_ERRORS) else f"{type(exc).__name__}: {text}"


def server_words(body: str) -> str:
    """The message inside an error reply's body (OpenAI's {"error": {"message"}}, FastAPI's "detail",
    or the plain text), on one line and short."""
    text = (body or "").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    for _ in range(3):  # {"error": {"message": ...}} and the like, a few levels deep
        if isinstance(data, dict):
            data = next((data[k] for k in ("error", "message", "detail", "msg") if data.get(k)), None)
        if isinstance(data, str):
            text = data
            break
    words = " ".join(re.sub(r"<[^>]+>", " ", text).split())
    return words if len(words) <= _WORDS else words[:_WORDS - 3] + "..."


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from or during, nearest first."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def check_failed_share(stage: str, failures: Sequence[Failure], total: int, max_share: float,
                       noun: str = "documents") -> None:
    """Raise RunFailed when more than `max_share` of the `total` items failed in `stage`, naming the cause."""
    failed = {f.doc: f for f in failures if f.stage == stage}
    if not total or len(failed) / total <= max_share:
        return
    counts = Counter(f.cause or f.error for f in failed.values())
    cause, count = counts.most_common(1)[0]
    if count == len(failed):
        said = f"all {total} {noun}" if len(failed) == total else f"{len(failed)} of {total} {noun}"
        head = f"{said} failed in {stage}: {cause}"
    else:
        head = (f"{len(failed)} of {total} {noun} failed in {stage}, {count} of them with {cause} "
                f"(and {len(counts) - 1} other cause{'s' if len(counts) > 2 else ''})")
    raise RunFailed(f"{head} (more than --max-failed-share {max_share:.0%}); {_remedy(cause)}")


def _remedy(cause: str) -> str:
    """What to do about the commonest cause."""
    if cause.startswith("connection refused"):
        return "start the server or pass the right --base-url"
    if cause.startswith("timed out"):
        return "check that the server is up, or raise --timeout"
    if "(Retry-After)" in cause:
        return "wait until the endpoint's rate limit resets, then continue with --resume RUN_DIR"
    if cause.startswith("HTTP "):
        return "fix what the endpoint refused (calls.jsonl in the run folder has every call)"
    return "see calls.jsonl in the run folder for every call"
