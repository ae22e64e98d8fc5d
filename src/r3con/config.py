"""Settings, resolved once at the edge: flags, then R3CON_* variables, then OPENAI_*, then defaults."""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import types
import typing
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .errors import ConfigError

STAGES = ("relevance", "schema", "populate", "reason", "judge")
DEFAULT_CONTEXT_WINDOW = 32_768
DEFAULT_CONCURRENCY = 8  # requests in flight when neither --concurrency nor the server's slots say
ROUTING_HEADERS = ("X-Session-ID", "X-Correlation-ID", "X-SMG-Routing-Key", "X-Dynamo-Session-ID")  # llm/transport/routing.py

Role = Literal["request", "question", "run", "operational"]
# What each setting is to a run, declared on its field (`_role`); the reuse key, the resume check and the
# manifest read it there (`Settings.roles`):
ROLES: dict[Role, str] = {
    "request": "its value is written into requests (the model, sampling, token limits, what a prompt holds and "
               "where): part of the question (reuse key), fixed for a run (refused on --resume)",
    "question": "decides which requests are made and what is made of the replies (rounds, stages, attempts, "
                "verification): part of the question, fixed for a run",
    "run": "how this run takes from earlier runs of its question (--reuse): fixed for a run, but not part of "
           "the question, so that every mode reads and feeds the same record",
    "operational": "how the run reaches the endpoint and what it may spend or tolerate: neither the requests "
                   "nor the result; may change on --resume",
}


def _role(role: Role, default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A Settings field with its role (`ROLES`) in its metadata."""
    return field(default=default, default_factory=default_factory, metadata={"role": role})


@dataclass(frozen=True)
class Settings:
    """Everything a run needs to know, frozen. Build it with `Settings.resolve(...)`."""

    base_url: str | None = _role("operational", None)
    base_urls: tuple[str, ...] = _role("operational", ())  # a pool of endpoints (`--base-url` repeated, R3CON_BASE_URLS); base_url is the first
    pool_file: Path | None = _role("operational", None)  # a TOML or JSON file of endpoints, each with its own key, model, weight, concurrency
    routing_headers: tuple[str, ...] = _role("operational", ROUTING_HEADERS)  # carry each document's routing key to a router
    api_key: str | None = _role("operational", None)
    model: str | None = _role("request", None)
    stage_models: Mapping[str, str] = _role("request", default_factory=dict)
    context_window: int | None = _role("request", None)
    concurrency: int | None = _role("operational", None)  # None: the server's slots (llama.cpp's /props total_slots), else DEFAULT_CONCURRENCY
    request_timeout_s: float = _role("operational", 600.0)
    organization: str | None = _role("operational", None)  # OpenAI-Organization header (env OPENAI_ORG_ID), for OpenAI accounts
    project: str | None = _role("operational", None)  # OpenAI-Project header (env OPENAI_PROJECT_ID)
    temperature: float | None = _role("request", None)
    rounds: int = _role("question", 2)
    reasoning: Literal["code", "direct"] = _role("request", "code")
    structuring: bool = _role("question", True)
    max_steps: int = _role("question", 10)
    note_max_tokens: int = _role("request", 1024)
    populate_max_tokens: int = _role("request", 4096)
    reason_max_tokens: int = _role("request", 4096)
    schema_attempts: int = _role("question", 3)
    populate_attempts: int = _role("question", 3)
    unverified: Literal["reask", "keep", "drop"] = _role("question", "reask")  # records whose passage is not in their document
    data_view_chars: int = _role("request", 24_000)
    part_tokens: int | None = _role("request", None)
    max_failed_share: float = _role("operational", 0.5)
    layout: Literal["cache", "paper"] = _role("request", "cache")
    alternate_order: bool = _role("operational", True)  # stages send their calls in alternating directions (`stages.plan`): the same requests, in another order
    adaptive_placement: bool = _role("request", True)  # place calls by what probes found of the endpoint's cache (`stages.plan`)
    cache_breakpoints: Literal["auto", "on", "off"] = _role("request", "auto")
    notes_budget_tokens: int | None = _role("request", None)
    notes_ranking: Literal["auto", "bm25", "embeddings"] = _role("request", "auto")  # auto: embeddings if --embedding-model is set
    reuse: Literal["exact", "approximate", "off"] = _role("run", "exact")  # what a run takes from earlier runs of its question (`reuse`)
    new_schema: bool = _role("run", False)  # --reuse approximate: propose a new schema rather than keep the earlier run's
    max_cost_usd: float | None = _role("operational", None)
    batch: bool = _role("request", False)
    batch_poll_s: float = _role("operational", 30.0)
    cache: bool = _role("operational", True)  # content-addressed cache of LLM calls; off with --no-cache
    cache_path: Path | None = _role("operational", None)  # resolve(): $XDG_CACHE_HOME/r3con/llm.sqlite; None (and no resolve): no cache
    retries: int = _role("operational", 6)  # attempts after the first, per call, on 429, 5xx, timeouts and dropped connections
    retry_budget: int = _role("operational", 200)  # retries a whole run may spend before calls fail for good
    retry_base_s: float = _role("operational", 0.5)  # first backoff (full jitter, doubling) when the endpoint sends no Retry-After
    retry_max_s: float = _role("operational", 60.0)  # longest single wait, Retry-After included
    outage_s: float = _role("operational", 180.0)  # how long one call waits out a server that refuses connections or answers 503
    rpm: int | None = _role("operational", None)  # requests per minute to the endpoint (None: unlimited)
    tpm: int | None = _role("operational", None)  # estimated tokens per minute to the endpoint (None: unlimited)
    max_tokens_cap: int = _role("request", 4096)  # the most reply tokens one call may ask for (a cut reply is kept, not asked again)
    max_call_s: float = _role("operational", 300.0)  # the longest one call may take, retries and their waits included
    max_reply_bytes: int | None = _role("operational", None)  # the most bytes one chat reply is read to; None: 1 MiB + 64 bytes per max_tokens (docs/resilience.md)
    # seconds an endpoint may keep a call without a word before it is asked whether it is alive (GET /models,
    # `probe_timeout_s`); one that does not answer is wedged: in a pool it is out and its calls move at once,
    # alone its calls are cancelled and waited out as an outage (`outage_s`; llm/transport/liveness.py)
    first_byte_s: float = _role("operational", 15.0)
    probe_timeout_s: float = _role("operational", 5.0)  # how long a liveness probe of an endpoint may take
    # what one reply's records may hold (`stages.populate.RecordLimits`): a reply over them degrades its document
    # with the reason. They decide which records a run keeps, so they are part of the question, as `unverified` is
    max_records: int = _role("question", 2_000)  # records one document part may yield
    max_record_fields: int = _role("question", 256)  # fields one record may have (the schema's and the passage)
    max_value_chars: int = _role("question", 20_000)  # characters one field's value may take, as JSON
    out_dir: Path = _role("operational", Path("r3con-runs"))
    log_calls: Literal["full", "compact", "meta"] = _role("operational", "compact")  # what calls.jsonl keeps of each request and reply
    prices_file: Path | None = _role("operational", None)
    sandbox_mode: Literal["best", "strict"] = _role("operational", "best")
    sandbox_timeout_s: float = _role("operational", 60.0)
    sandbox_memory_mb: int = _role("operational", 4096)
    embedding_model: str | None = _role("request", None)  # /v1/embeddings model for dense retrieval (rag, raptor); None: BM25 only
    corpus_store: bool = _role("operational", True)  # keep what does not depend on the question per document content (`store`)
    corpus_dir: Path | None = _role("operational", None)  # resolve(): `corpus/` beside the LLM cache; the store's folder
    engine: Literal["local", "ray"] = _role("operational", "local")  # where per-document calls run: this process, or Ray workers (`engine`); a run started locally may continue on a cluster, and back
    ray_address: str | None = _role("operational", None)  # --engine ray: the cluster to join (None: RAY_ADDRESS, else a local one)

    @classmethod
    def roles(cls) -> dict[str, Role | None]:
        """Each setting's role (`ROLES`), as its field declares it; None for a field that declares none."""
        return {f.name: f.metadata.get("role") for f in dataclasses.fields(cls)}

    def question_settings(self) -> dict[str, Any]:
        """The settings that shape the question's requests and results (roles "request" and "question", and
        any field that declares no role): what the reuse key is taken of."""
        return {name: getattr(self, name) for name, role in self.roles().items()
                if role not in ("run", "operational")}

    def model_for(self, stage: str) -> str | None:
        """The model for `stage`: a per-stage choice if set, else the default model."""
        return self.stage_models.get(stage) or self.model

    def public(self) -> dict[str, Any]:
        """The settings as JSON-compatible data, with the API key hidden (for manifests)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "api_key":
                value = "***" if value else None
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    @classmethod
    def resolve(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Combine flags (`overrides`, None meaning unset) with the environment and the defaults.

        With no endpoint set (no base URL, no pool file), `r3con.run` uses the local server that answers on
        the usual ports, as `r3con run` does (`llm.discovery.local.use_local_server`).
        """
        env = os.environ if env is None else env
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        given: dict[str, str] = {}  # setting -> where its value came from, for messages: R3CON_ROUNDS, --rounds
        for f in dataclasses.fields(cls):
            if f.name == "stage_models":
                continue
            raw = env.get(f"R3CON_{f.name.upper()}")
            if raw is not None and raw != "":
                values[f.name] = _parse(f.name, raw, hints[f.name], f"R3CON_{f.name.upper()}")
                given[f.name] = f"R3CON_{f.name.upper()}"
        if values.get("base_urls") and not values.get("base_url"):
            values["base_url"] = values["base_urls"][0]
        for name, variable in (("base_url", "OPENAI_BASE_URL"), ("api_key", "OPENAI_API_KEY"),
                               ("organization", "OPENAI_ORG_ID"), ("project", "OPENAI_PROJECT_ID")):
            if name not in values and env.get(variable):
                values[name] = env[variable]
                given[name] = variable
        stage_models = {
            stage: env[f"R3CON_MODEL_{stage.upper()}"] for stage in STAGES if env.get(f"R3CON_MODEL_{stage.upper()}")
        }
        stage_models.update(overrides.pop("stage_models", None) or {})
        for name, value in overrides.items():
            if name not in hints:
                raise TypeError(f"unknown setting {name!r}")
            if value is not None:
                values[name] = _parse(name, value, hints[name], flag(name)) if isinstance(value, str) else value
                given[name] = flag(name)
        if overrides.get("base_urls"):  # `--base-url` repeated: the first is the base URL
            values["base_urls"] = tuple(values["base_urls"])
            values["base_url"] = values["base_urls"][0]
        values["stage_models"] = stage_models
        if values.get("cache_path") is None:
            values["cache_path"] = default_cache_path(env)
        if values.get("corpus_dir") is None and values["cache_path"] is not None:
            values["corpus_dir"] = Path(values["cache_path"]).parent / "corpus"
        for name in _HEADER_VALUES:
            if isinstance(values.get(name), str):
                values[name] = _header_value(values[name], given.get(name, flag(name)))
        settings = cls(**values)
        try:
            settings.check()
        except ConfigError as exc:  # the message names the flag; name the variable when the value came from one
            message = str(exc)
            for name, source in given.items():
                if not source.startswith("--") and re.search(rf"{re.escape(flag(name))}\b", message):
                    raw = env.get(source, values.get(name))
                    named = f"{source}={shown_url(raw) if isinstance(raw, str) else raw}"
                    raise ConfigError(re.sub(rf"{re.escape(flag(name))}\b", named, message, count=1)) from None
            raise
        return settings

    def check(self) -> None:
        """Raise ConfigError on values that cannot work."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{flag(f.name)} {value} is not a number r3con can use; give a finite number "
                                  "(docs/configuration.md lists each setting's default)")
        if self.rounds < 0:
            raise ConfigError("--rounds must be 0 or more (0 skips relevance extraction)")
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError("--concurrency must be at least 1")
        if self.max_steps < 1:
            raise ConfigError("--max-steps must be at least 1")
        if self.reasoning not in ("code", "direct"):
            raise ConfigError("--reasoning must be 'code' or 'direct'")
        if not self.request_timeout_s > 0:
            raise ConfigError(f"--timeout {self.request_timeout_s:g} cannot work: give the seconds one request may "
                              "take, more than 0 (default 600)")
        if not self.max_call_s > 0:
            raise ConfigError("R3CON_MAX_CALL_S must be more than 0 seconds (default 300)")
        if self.max_reply_bytes is not None and self.max_reply_bytes < 4096:
            raise ConfigError(f"R3CON_MAX_REPLY_BYTES={self.max_reply_bytes} is too small for any reply; give at least "
                              "4096, or leave it unset (1 MiB + 64 bytes per reply token)")
        for name, value in (("R3CON_FIRST_BYTE_S", self.first_byte_s), ("R3CON_PROBE_TIMEOUT_S", self.probe_timeout_s)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ConfigError(f"{name}={value} cannot work: give a number of seconds above 0 (docs/resilience.md)")
        for name, count in (("R3CON_MAX_RECORDS", self.max_records), ("R3CON_MAX_RECORD_FIELDS", self.max_record_fields),
                            ("R3CON_MAX_VALUE_CHARS", self.max_value_chars)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigError(f"{name}={count} cannot work: give a whole number of at least 1, or leave it unset "
                                  "(docs/resilience.md gives the default)")
        if self.max_tokens_cap < 16:
            raise ConfigError("R3CON_MAX_TOKENS_CAP must be at least 16 reply tokens (default 4096)")
        if self.base_url:
            check_base_url(self.base_url)
        seen: dict[str, str] = {}
        for url in self.base_urls:
            check_base_url(url)
            same = seen.get(same_endpoint(url))
            seen.setdefault(same_endpoint(url), url)
            if same is not None:
                raise ConfigError(f"--base-url {shown_url(url)} is given twice ({shown_url(same)} is the same server); "
                                  "list each endpoint of the pool once")
        if self.batch and (len(self.base_urls) > 1 or self.pool_file is not None):
            raise ConfigError("--batch sends to one endpoint's Batch API; pass one --base-url, not a pool")
        if self.engine not in ("local", "ray"):
            raise ConfigError("--engine must be 'local' (this process) or 'ray' (Ray workers; needs r3con[ray])")
        if self.engine == "ray" and self.batch:
            raise ConfigError("--batch sends from this process; drop --engine ray or --batch")
        if self.unverified not in ("reask", "keep", "drop"):
            raise ConfigError("--unverified must be 'reask' (once, then keep flagged), 'keep' (flagged) or 'drop'")
        if self.layout not in ("cache", "paper"):
            raise ConfigError("--layout must be 'cache' or 'paper'")
        if self.cache_breakpoints not in ("auto", "on", "off"):
            raise ConfigError("--cache-breakpoints must be 'auto', 'on' or 'off'")
        if self.notes_budget_tokens is not None and self.notes_budget_tokens < 0:
            raise ConfigError("--notes-budget must be 0 (every note in full, as the paper) or a number of tokens")
        if self.max_cost_usd is not None and self.max_cost_usd <= 0:
            raise ConfigError("--max-cost must be a positive amount in USD")
        if self.context_window is not None and self.context_window < 2048:
            raise ConfigError("--context-window must be at least 2048 tokens")
        if self.retries < 0 or self.retry_budget < 0:
            raise ConfigError("--retries and the retry budget must be 0 or more")
        if (self.rpm is not None and self.rpm < 1) or (self.tpm is not None and self.tpm < 1):
            raise ConfigError("--rpm and --tpm must be at least 1 (leave them unset for no limit)")
        if self.part_tokens is not None and self.part_tokens < 256:
            raise ConfigError("--part-tokens must be at least 256 (leave it unset to fit the window)")
        if not 0.0 <= self.max_failed_share <= 1.0:
            raise ConfigError("--max-failed-share must be between 0 and 1")
        if self.log_calls not in ("full", "compact", "meta"):
            raise ConfigError("--log-calls must be 'full', 'compact' or 'meta'")
        for stage in self.stage_models:
            if stage not in STAGES:
                raise ConfigError(f"unknown stage {stage!r} for a stage model; use one of {', '.join(STAGES)}")

    def require_endpoint(self) -> str:
        """The base URL, or a ConfigError saying how to set it."""
        if not self.base_url:
            raise ConfigError("no endpoint configured: set OPENAI_BASE_URL or R3CON_BASE_URL, or pass --base-url")
        return self.base_url


_FLAGS = {"max_cost_usd": "--max-cost", "request_timeout_s": "--timeout", "notes_budget_tokens": "--notes-budget",
          "sandbox_mode": "--sandbox", "out_dir": "--out", "cache_path": "--cache", "prices_file": "--prices"}
_HEADER_VALUES = ("api_key", "organization", "project")  # sent as HTTP header values


def flag(name: str) -> str:
    """The command-line flag of the setting `name` (`--max-cost` for max_cost_usd)."""
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def _header_value(value: str, source: str) -> str:
    """`value` without the white space around it (`$(cat key.txt)` ends in a newline); ConfigError naming
    `source` for a character no HTTP header can carry."""
    trimmed = value.strip()
    for i, c in enumerate(trimmed):
        if ord(c) < 32 or ord(c) == 127 or ord(c) > 126:
            what = f"the control character {c!r}" if ord(c) < 32 or ord(c) == 127 else f"the character {c!r}"
            raise ConfigError(f"{source} holds {what} at position {i + 1}, which no HTTP header can carry; "
                              "set it to the key itself (printable ASCII, e.g. sk-...)")
    return trimmed


def unknown_variables(env: Mapping[str, str] | None = None) -> list[str]:
    """A warning for each R3CON_* variable that r3con does not read (a misspelt setting is otherwise ignored
    in silence), with the closest real name."""
    env = os.environ if env is None else env
    known = {f"R3CON_{f.name.upper()}" for f in dataclasses.fields(Settings) if f.name != "stage_models"}
    known |= {f"R3CON_MODEL_{stage.upper()}" for stage in STAGES} | _OTHER_VARIABLES
    out = []
    for name in sorted(env):
        if name.startswith("R3CON_") and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else "see docs/configuration.md for the names"
            out.append(f"{name} is not a setting r3con reads ({hint}); it is ignored")
    for name, read in _OPENAI_LOOKALIKES.items():  # names other tools document: r3con reads the openai SDK's
        if env.get(name) and not env.get(read):
            out.append(f"{name} is not read (the openai SDK's name is {read}); set {read}, or it is ignored")
    return out


_OPENAI_LOOKALIKES = {"OPENAI_ORGANIZATION": "OPENAI_ORG_ID", "OPENAI_PROJECT": "OPENAI_PROJECT_ID"}


_OTHER_VARIABLES = frozenset({"R3CON_PDF_PASSWORD", "R3CON_DEBUG", "R3CON_DATA", "R3CON_VENV", "R3CON_LLAMA_CPP",
                              "R3CON_LOCAL_PORTS", "R3CON_SCREENSHOTS", "R3CON_CHROMIUM", "R3CON_CHROMEDRIVER",
                              "R3CON_ROUTER_BIN", "R3CON_OTEL_CONTENT"})


def shown_url(url: str) -> str:
    """`url` as it may be shown (messages, logs, manifests): any user name and password in it replaced by ***."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.username is None and parts.password is None:
        return url.strip()
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))


def same_endpoint(url: str) -> str:
    """`url` as one server has it however written: scheme and host in lower case, without the default port or a
    trailing slash (two pool entries with the same value are one endpoint)."""
    parts = urllib.parse.urlsplit(url.strip().rstrip("/"))
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = (parts.hostname or "").lower()
    if port is not None and port != {"http": 80, "https": 443}.get(scheme):
        netloc += f":{port}"
    return urllib.parse.urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def check_base_url(base_url: str) -> str:
    """The base URL without a trailing slash; ConfigError for one that cannot be an OpenAI-compatible endpoint,
    or that carries a user name and password (never sent, never shown)."""
    url = base_url.strip().rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ConfigError(f"--base-url {shown_url(url)} carries a user name and password, which r3con neither sends "
                          "nor stores; pass the URL without them and the key with --api-key or OPENAI_API_KEY "
                          "(key_env in a --pool file)")
    try:
        _ = parts.port
    except ValueError:
        raise ConfigError(f"--base-url {url!r} has a port that is no number from 0 to 65535; pass a URL such as "
                          "http://localhost:8000/v1") from None
    if parts.scheme not in ("http", "https"):
        shown = f"the scheme {parts.scheme}://" if parts.scheme else "no scheme"
        raise ConfigError(f"--base-url {base_url!r} has {shown}; pass an http:// or https:// URL such as "
                          "http://localhost:8000/v1")
    if not parts.hostname:
        raise ConfigError(f"--base-url {base_url!r} names no host; pass a URL such as http://localhost:8000/v1")
    return url


def endpoint_flags(base_urls: list[str] | None, pool: Path | None = None,
                   routing_headers: list[str] | None = None) -> dict[str, Any]:
    """`--base-url` (repeatable: a pool), `--pool FILE` and `--routing-header` (repeatable; `none` sends none)
    as settings overrides."""
    urls = tuple(base_urls or ())
    headers: tuple[str, ...] | None = None
    if routing_headers:
        headers = () if [h.lower() for h in routing_headers] == ["none"] else tuple(routing_headers)
        bad = [h for h in headers if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", h)]
        if bad:
            raise ConfigError(f"--routing-header {bad[0]!r} is not an HTTP header name; give one like X-Session-ID")
    return {"base_url": urls[0] if urls else None, "base_urls": urls or None, "pool_file": pool,
            "routing_headers": headers}


def parse_stage_models(values: list[str] | tuple[str, ...] | None) -> dict[str, str]:
    """`--stage-model STAGE=MODEL` values as {stage: model}; ConfigError on a value of another shape."""
    out: dict[str, str] = {}
    for value in values or []:
        stage, sep, model = value.partition("=")
        if not sep or not stage.strip() or not model.strip():
            raise ConfigError(f"--stage-model {value!r} must look like STAGE=MODEL, e.g. relevance=qwen3.5-4b")
        out[stage.strip()] = model.strip()
    return out


def default_cache_path(env: Mapping[str, str]) -> Path | None:
    """$XDG_CACHE_HOME/r3con/llm.sqlite, else ~/.cache/r3con/llm.sqlite; None when `env` names no home."""
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "r3con" / "llm.sqlite"
    if env.get("HOME"):
        return Path(env["HOME"]) / ".cache" / "r3con" / "llm.sqlite"
    return None


def _parse(name: str, raw: Any, hint: Any, source: str) -> Any:
    """Parse a string from the environment or a flag into the field's type."""
    if not isinstance(raw, str):
        return raw
    options = [a for a in typing.get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    target = options[0] if options else str
    try:
        if typing.get_origin(target) is Literal:
            allowed = typing.get_args(target)
            if raw not in allowed:
                raise ValueError(f"expected one of {', '.join(map(str, allowed))}")
            return raw
        if target is bool:
            lowered = raw.strip().lower()
            if lowered in {"1", "true", "yes", "on"}:
                return True
            if lowered in {"0", "false", "no", "off"}:
                return False
            raise ValueError("expected true or false")
        if typing.get_origin(target) is tuple:  # a list: comma- or space-separated
            return tuple(item for item in re.split(r"[,\s]+", raw) if item)
        if target in (int, float):
            return target(raw)
        if target is Path:
            return Path(raw).expanduser()
        return raw
    except ValueError as exc:
        raise ConfigError(f"{source}={raw!r} is not valid for {name}: {exc}") from exc


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)
