"""USD prices per million tokens, matched against model ids; users extend the table with a JSON file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .types import Usage


@dataclass(frozen=True)
class Price:
    """USD per million tokens. `cached_input` defaults to the input price when unknown."""

    input: float
    output: float
    cached_input: float | None = None


# OpenRouter prices as of 2026-09, USD per million input/output tokens.
DEFAULT_PRICES: Mapping[str, Price] = {
    "qwen3.5-35b-a3b": Price(0.14, 1.00),
    "qwen3.5-9b": Price(0.10, 0.15),
    "qwen3.5-4b": Price(0.05, 0.07),
}


def _normalise(model: str) -> str:
    return model.lower().rsplit("/", 1)[-1].replace("_", "-")


@dataclass(frozen=True)
class PriceTable:
    """Looks up a model's price: exact id first, then the longest known name contained in the id.

    `batch_discount` scales the cost of calls sent through a Batch API (half price on OpenAI).
    """

    prices: Mapping[str, Price]
    batch_discount: float = 0.5

    @classmethod
    def load(cls, path: Path | None = None) -> PriceTable:
        """The default table, extended (and overridden) by a JSON file {"model": {"input": .., "output": ..}}."""
        prices = dict(DEFAULT_PRICES)
        if path is not None:
            try:
                data = json.loads(Path(path).read_text())
                for name, entry in data.items():
                    prices[_normalise(name)] = Price(
                        float(entry["input"]), float(entry["output"]),
                        None if entry.get("cached_input") is None else float(entry["cached_input"]),
                    )
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ConfigError(
                    f"cannot read price table {path}: {exc}; expected JSON like "
                    '{"my-model": {"input": 0.1, "output": 0.2}} in USD per million tokens'
                ) from exc
        return cls(prices)

    def find(self, model: str) -> Price | None:
        name = _normalise(model)
        if name in self.prices:
            return self.prices[name]
        matches = [key for key in self.prices if key in name]
        return self.prices[max(matches, key=len)] if matches else None

    def cost(self, model: str, usage: Usage, batch: bool = False) -> float:
        price = self.find(model)
        if price is None:
            return 0.0
        scale = self.batch_discount if batch else 1.0
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_price = price.input if price.cached_input is None else price.cached_input
        return scale * (
            (usage.prompt_tokens - cached) * price.input
            + cached * cached_price
            + usage.completion_tokens * price.output
        ) / 1_000_000
