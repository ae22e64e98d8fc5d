"""USD prices per million tokens: the user's `--prices` file, then pydantic's genai-prices database, then
"local and free" for a server on this machine or a private network; any other model's price is unknown.

The order is the one a user can act on: their file wins over everything (a local model they want to
charge for, a negotiated rate); a model the database knows is priced as its provider bills it, even
behind a proxy on localhost (LiteLLM, a router); a model it does not know, served from a loopback,
private or link-local address, runs on hardware the user already pays for, so it is free, and is said
to be local; anything else is "price unknown", never $0.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import ConfigError
from .types import Usage

FROM_FILE = "prices file"
LOCAL = "local server"
DATABASE = "genai-prices"


@dataclass(frozen=True)
class Price:
    """USD per million tokens. `cached_input` (a prompt token read from the provider's cache: below the input
    price) and `cache_write` (one written to it: above it at Anthropic) default to the input price when unknown."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    @property
    def dearest_input(self) -> float:
        """The most a prompt token may be billed, however the provider's cache took it."""
        return max(self.input, self.cached_input or 0.0, self.cache_write or 0.0)


@dataclass(frozen=True)
class Quote:
    """A model's price and where it came from: `source` is FROM_FILE, LOCAL, or "genai-prices: <provider> <model>"
    (None `price`: unknown, with `source` saying why)."""

    price: Price | None
    source: str

    @property
    def local(self) -> bool:
        return self.source == LOCAL


def _normalise(model: str) -> str:
    return model.lower().rsplit("/", 1)[-1].replace("_", "-")


def is_local_url(base_url: str | None) -> bool:
    """Whether `base_url` is on this machine or a private network (loopback, RFC 1918, link-local, .local)."""
    if not base_url:
        return False
    host = (urlsplit(base_url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith((".localhost", ".local", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


@lru_cache(maxsize=256)
def _database_price(model: str, provider_api_url: str | None) -> tuple[Price, str] | None:
    """The model's price in genai-prices (at the provider `provider_api_url` names, if it names one it knows)."""
    from genai_prices import Usage as PricesUsage
    from genai_prices import calc_price

    # a million prompt tokens each way the provider bills them (genai-prices counts cache reads and writes in
    # `input_tokens`, as the prompt tokens of a chat reply do)
    per_million = PricesUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    cached = PricesUsage(input_tokens=1_000_000, cache_read_tokens=1_000_000)
    written = PricesUsage(input_tokens=1_000_000, cache_write_tokens=1_000_000)
    try:
        found, read, wrote = ((calc_price(usage, model) if provider_api_url is None
                               else calc_price(usage, model, provider_api_url=provider_api_url))
                              for usage in (per_million, cached, written))
    except LookupError:
        if provider_api_url is None and "/" in model:  # "openai/gpt-4o-mini" through a proxy: the model's own price
            return _database_price(model.rsplit("/", 1)[-1], None)
        return None
    if provider_api_url is None and not _close(model, found.model.id):
        return None  # genai-prices matches loosely without a provider ("deepseek-r1:8b" to deepseek-reasoner)
    base = Decimal(found.input_price)
    return (Price(float(found.input_price), float(found.output_price),
                  float(read.input_price) if read.input_price != base else None,
                  float(wrote.input_price) if wrote.input_price != base else None),
            f"{DATABASE}: {found.provider.name} {found.model.id}")


def _close(model: str, matched: str) -> bool:
    """`model` names `matched` itself or a dated snapshot of it (gpt-4o-mini-2024-07-18), not a relative."""
    name, matched = _normalise(model), _normalise(matched)
    matched = re.sub(r"-(0|latest)$", "", matched)  # the database's alias of a family's snapshots (claude-sonnet-4-0)
    return name == matched or bool(re.fullmatch(re.escape(matched) + r"(-\d{4}-?\d{2}-?\d{2}|-latest|-0|-\d{3,4})?", name))


def _known_provider(base_url: str | None) -> str | None:
    """`base_url` when genai-prices knows the provider it belongs to (api.openai.com, openrouter.ai ...), else None."""
    if not base_url or is_local_url(base_url):
        return None
    from genai_prices import data_snapshot

    try:
        data_snapshot.get_snapshot().find_provider(None, None, base_url)
    except LookupError:
        return None
    return base_url


@dataclass(frozen=True)
class PriceTable:
    """Looks up a model's price (see the module docstring for the order).

    `prices`: the user's, matched by exact id first, then the longest known name contained in the id.
    `base_url`: the endpoint the calls go to: it picks the provider in the database, and makes an
    unknown model local and free when it is on this machine or a private network.
    `batch_discount` scales the cost of calls sent through a Batch API (half price on OpenAI).
    """

    prices: Mapping[str, Price] = field(default_factory=dict)
    base_url: str | None = None
    batch_discount: float = 0.5
    database: bool = True

    @classmethod
    def load(cls, path: Path | None = None, base_url: str | None = None) -> PriceTable:
        """The database, under the JSON file {"model": {"input": .., "output": .., "cached_input": .., "cache_write": ..}}
        if given."""
        prices: dict[str, Price] = {}
        if path is not None:
            try:
                data = json.loads(Path(path).read_text())
                for name, entry in data.items():
                    prices[_normalise(name)] = Price(
                        float(entry["input"]), float(entry["output"]),
                        None if entry.get("cached_input") is None else float(entry["cached_input"]),
                        None if entry.get("cache_write") is None else float(entry["cache_write"]),
                    )
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ConfigError(
                    f"cannot read price table {path}: {exc}; expected JSON like "
                    '{"my-model": {"input": 0.1, "output": 0.2}} in USD per million tokens'
                ) from exc
        return cls(prices, base_url)

    def quote(self, model: str) -> Quote:
        """The model's price and its source; an unknown price says why (looked up once per model: every
        completion is priced)."""
        memo: dict[str, Quote] = self.__dict__.setdefault("_quotes", {})
        found = memo.get(model)
        if found is None:
            found = memo[model] = self._quote(model)
        return found

    def _quote(self, model: str) -> Quote:
        name = _normalise(model)
        if name in self.prices:
            return Quote(self.prices[name], FROM_FILE)
        matches = [key for key in self.prices if key in name]
        if matches:
            return Quote(self.prices[max(matches, key=len)], FROM_FILE)
        if self.database and model:
            found = _database_price(model, _known_provider(self.base_url))
            if found is not None:
                return Quote(*found)
        if is_local_url(self.base_url):
            return Quote(Price(0.0, 0.0), LOCAL)
        where = f" at {self.base_url}" if self.base_url else ""
        return Quote(None, f"no price for model {model!r}{where} in genai-prices or a --prices file")

    def find(self, model: str) -> Price | None:
        return self.quote(model).price

    def cost(self, model: str, usage: Usage, batch: bool = False) -> float | None:
        """USD of `usage` on `model`; None when its price is unknown."""
        price = self.find(model)
        if price is None:
            return None
        scale = self.batch_discount if batch else 1.0
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        written = min(usage.cache_write_tokens, usage.prompt_tokens - cached)
        cached_price = price.input if price.cached_input is None else price.cached_input
        write_price = price.input if price.cache_write is None else price.cache_write
        return scale * (
            (usage.prompt_tokens - cached - written) * price.input
            + cached * cached_price
            + written * write_price
            + usage.completion_tokens * price.output
        ) / 1_000_000

    def priced(self, model: str, usage: Usage, batch: bool = False) -> Usage:
        """`usage` with its cost, or marked as unpriced (its model named), or as answered locally for free."""
        quote = self.quote(model)
        cost = self.cost(model, usage, batch)
        if cost is None:
            return usage.with_cost(0.0, unpriced=(model or "unknown",))
        return usage.with_cost(cost, local=quote.local)
