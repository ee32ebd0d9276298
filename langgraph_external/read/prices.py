"""What a model call cost: a price table the user sets, applied to recorded token usage.

The package ships no prices (they change, and differ per contract). A table maps a model
name (or a glob pattern such as ``gpt-4o-mini*``, for dated versions) to the price of a
million input and output tokens. It is read from, first found wins:

1. the file given to ``lgx ui --prices FILE`` / ``lgx timeline --prices FILE``;
2. the file named by ``$LGX_PRICES``;
3. ``[tool.langgraph-external.prices]`` in ``./pyproject.toml``.

A file is YAML (``.yaml``/``.yml``), JSON (``.json``) or TOML (``.toml``: the same
``[tool.langgraph-external.prices]`` table, or a top-level one). Every form has the same
shape::

    currency = "USD"                                # optional, default USD
    "gpt-4o-mini" = { input = 0.15, output = 0.60 } # per 1 000 000 tokens
    "claude-3-5-haiku*" = { input = 0.80, output = 4.00 }

A model with no entry has an *unknown price*: :meth:`PriceTable.cost` returns ``None``
and the views say "unknown price" rather than counting it as free.

Example:
    >>> table = PriceTable.from_mapping({"gpt-4o-mini*": {"input": 0.15, "output": 0.6}})
    >>> table.cost("gpt-4o-mini-2024-07-18", input_tokens=1000, output_tokens=500)
    0.00045
    >>> table.cost("my-local-model", input_tokens=1000, output_tokens=500) is None
    True
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from langgraph_external.errors import ConfigurationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["ModelPrice", "PriceTable", "PricesError", "load_prices"]

ENV_VAR = "LGX_PRICES"
PYPROJECT_KEY = ("tool", "langgraph-external", "prices")


class PricesError(ConfigurationError):
    """A price table could not be read or has a bad entry."""


@dataclass(frozen=True)
class ModelPrice:
    """Price of one million input and output tokens."""

    input: float
    output: float


@dataclass(frozen=True)
class PriceTable:
    """Model name or glob pattern -> :class:`ModelPrice`; exact names win over patterns.

    Attributes:
        prices: the entries.
        currency: the currency of every price (shown next to costs).
        source: where the table was read from (``None``: no table).
    """

    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    currency: str = "USD"
    source: str | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str | None = None) -> PriceTable:
        """Build a table from ``{"currency": ..., MODEL: {"input": x, "output": y}}``.

        Raises:
            PricesError: an entry is not a mapping of two non-negative numbers.
        """
        if not isinstance(data, Mapping):
            raise PricesError(f"{source or 'prices'}: expected a table of models")
        currency = data.get("currency", "USD")
        if not isinstance(currency, str) or not currency.strip():
            raise PricesError(f"{source or 'prices'}: currency must be a non-empty string")
        prices: dict[str, ModelPrice] = {}
        for model, entry in data.items():
            if model == "currency":
                continue
            where = f"{source or 'prices'}: model {model!r}"
            if not isinstance(entry, Mapping) or set(entry) - {"input", "output"}:
                raise PricesError(f"{where}: expected {{input = <price>, output = <price>}}")
            values = []
            for side in ("input", "output"):
                v = entry.get(side, 0)
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise PricesError(f"{where}: {side} must be a number, not {v!r}")
                if v < 0:
                    raise PricesError(f"{where}: {side} must not be negative")
                values.append(float(v))
            prices[str(model)] = ModelPrice(values[0], values[1])
        return cls(prices, currency.strip(), source)

    def price_of(self, model: str | None) -> ModelPrice | None:
        """The entry for ``model``: its exact name, else the longest matching pattern."""
        if not model:
            return None
        if model in self.prices:
            return self.prices[model]
        matches = [p for p in self.prices if fnmatch.fnmatchcase(model, p)]
        return self.prices[max(matches, key=len)] if matches else None

    def cost(
        self, model: str | None, *, input_tokens: int | None, output_tokens: int | None
    ) -> float | None:
        """What a call cost, or ``None`` when the model has no price (or no usage)."""
        price = self.price_of(model)
        if price is None or (input_tokens is None and output_tokens is None):
            return None
        total = (input_tokens or 0) * price.input + (output_tokens or 0) * price.output
        return round(total / 1_000_000, 10)


def _read_file(path: Path) -> Mapping[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PricesError(f"cannot read the price table {path}: {exc.strerror or exc}") from exc
    try:
        if path.suffix in (".yaml", ".yml"):
            data: Any = yaml.safe_load(text) or {}
        elif path.suffix == ".json":
            data = json.loads(text)
        elif path.suffix == ".toml":
            doc = tomllib.loads(text)
            data = _dig(doc, PYPROJECT_KEY)
            data = doc if data is None else data
        else:
            raise PricesError(f"{path}: a price table is a .yaml, .yml, .json or .toml file")
    except (yaml.YAMLError, ValueError) as exc:
        raise PricesError(f"{path}: not valid {path.suffix[1:].upper()}: {exc}") from exc
    if not isinstance(data, Mapping):
        raise PricesError(f"{path}: expected a table of models")
    return data


def _dig(doc: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    cur: Any = doc
    for k in keys:
        if not isinstance(cur, Mapping) or k not in cur:
            return None
        cur = cur[k]
    return cur


def load_prices(
    path: str | os.PathLike[str] | None = None, *, cwd: Path | None = None
) -> PriceTable:
    """The price table from ``path``, else ``$LGX_PRICES``, else ``./pyproject.toml``.

    Returns an empty table (every price unknown) when none is configured.

    Raises:
        PricesError: the configured file is missing, unreadable or malformed.
    """
    chosen = path or os.environ.get(ENV_VAR) or None
    if chosen:
        p = Path(chosen)
        return PriceTable.from_mapping(_read_file(p), str(p))
    pyproject = (cwd or Path.cwd()) / "pyproject.toml"
    if pyproject.is_file():
        try:
            doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return PriceTable()  # someone else's broken pyproject is not our configuration
        data = _dig(doc, PYPROJECT_KEY)
        if data is not None:
            return PriceTable.from_mapping(data, f"{pyproject} [tool.langgraph-external.prices]")
    return PriceTable()
