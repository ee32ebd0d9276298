"""Reading policy text within limits: YAML and JSON, bounded before they are expanded.

A policy file is input from outside the program, so loading is bounded before anything
is parsed or expanded (:class:`PolicyLimits`): the file's size, how deeply it nests, and
how many YAML aliases it holds and what they expand to. A file beyond a limit raises
:class:`PolicyLimitError`; every other bad shape raises :class:`PolicyError`, whose
message never renders more than a short preview of the input.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from langgraph_external.guards._errors import PolicyError, PolicyLimitError, one_line, preview

MAX_NUMBER_CHARS = 100
"""Longest number literal a policy file may hold (policies need small counts only)."""


@dataclass(frozen=True)
class PolicyLimits:
    """Bounds on what loading a policy file may cost, checked before the cost is paid.

    A real policy is a few kilobytes, nests four levels deep and needs no YAML aliases;
    the defaults leave ample room for that and refuse hostile files (a "billion laughs"
    alias bomb, a 100 MB file) in milliseconds with :class:`PolicyLimitError`.

    Args:
        max_bytes: largest file (or text, in UTF-8) accepted: 256 KiB. Checked before
            the file is read, so a huge file is refused without being read.
        max_depth: deepest nesting of mappings and lists, aliases expanded: 20 (a
            policy uses 4).
        max_aliases: most YAML aliases (``*name``) in one document: 50. Anchors and
            aliases stay usable for small repetitions such as shared node rules.
        max_alias_values: most values (scalars, lists, mappings) all aliases together
            may expand to: 10 000. This is what stops an alias bomb, which needs few
            aliases but expands each many times.

    Example:
        >>> from langgraph_external.guards import TransitionPolicy
        >>> try:
        ...     TransitionPolicy.from_yaml("states: [a]", limits=PolicyLimits(max_bytes=10))
        ... except PolicyLimitError as exc:
        ...     print(exc)  # doctest: +NORMALIZE_WHITESPACE
        invalid policy: the policy is 11 characters, more than the limit of 10 bytes
        (PolicyLimits.max_bytes)
    """

    max_bytes: int = 256 * 1024
    max_depth: int = 20
    max_aliases: int = 50
    max_alias_values: int = 10_000

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_depth", "max_aliases", "max_alias_values"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"PolicyLimits.{name} must be an int >= 0, got {value!r}")


DEFAULT_LIMITS = PolicyLimits()


# -- loading within limits ------------------------------------------------------------
class _LimitExceeded(Exception):
    """Raised inside the parsers; becomes a :class:`PolicyLimitError` with a location."""

    def __init__(self, message: str, mark: yaml.Mark | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


def _where(mark: yaml.Mark | None) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def check_text_size(text: str, limits: PolicyLimits, source: str | None) -> None:
    """Refuse text over ``max_bytes`` in UTF-8, without encoding a text far too long."""
    if len(text) > limits.max_bytes:  # every character takes at least one byte
        check_size(len(text), limits, source, "policy", "characters")
    check_size(len(text.encode("utf-8", "surrogatepass")), limits, source, "policy")


def check_size(
    size: int, limits: PolicyLimits, source: str | None, what: str, unit: str = "bytes"
) -> None:
    if size > limits.max_bytes:
        raise PolicyLimitError(
            f"the {what} is {size} {unit}, more than the limit of {limits.max_bytes} bytes "
            "(PolicyLimits.max_bytes)",
            source=source,
        )


def parse_yaml(text: str, source: str | None, limits: PolicyLimits) -> Any:
    loader: _PolicyLoader | None = None
    try:
        loader = _PolicyLoader(text, limits)  # the reader refuses control characters here
        data = loader.get_single_data()
    except _LimitExceeded as exc:
        raise PolicyLimitError([(_where(exc.mark), exc.message)], source=source) from None
    except yaml.MarkedYAMLError as exc:
        problem = exc.problem or one_line(exc)
        raise PolicyError([(_where(exc.problem_mark), problem)], source=source) from None
    except yaml.YAMLError as exc:
        raise PolicyError(one_line(exc), source=source) from None
    except (ValueError, TypeError, OverflowError) as exc:
        # a scalar that matched a YAML type but cannot be built (``2024-13-45``)
        raise PolicyError(f"invalid value: {one_line(exc)}", source=source) from None
    finally:
        if loader is not None:
            loader.dispose()
    _check_top_level(data, source)
    return data


def parse_json(text: str, source: str | None, limits: PolicyLimits) -> Any:
    try:
        data = json.loads(
            text,
            object_pairs_hook=_json_object,
            parse_int=lambda text: int(_check_number(text, "digits")),
            parse_float=lambda text: float(_check_number(text)),
            parse_constant=_json_constant,
        )
    except _LimitExceeded as exc:
        raise PolicyLimitError(exc.message, source=source) from None
    except json.JSONDecodeError as exc:
        loc = f"line {exc.lineno}, column {exc.colno}"
        raise PolicyError([(loc, exc.msg)], source=source) from None
    except ValueError as exc:  # raised by the hooks below
        raise PolicyError(one_line(exc), source=source) from None
    except RecursionError:  # the C scanner recurses per level; far beyond max_depth
        raise PolicyLimitError(_too_deep(limits), source=source) from None
    if _depth(data) > limits.max_depth:
        raise PolicyLimitError(_too_deep(limits), source=source)
    _check_top_level(data, source)
    return data


def _too_deep(limits: PolicyLimits) -> str:
    return f"nested more than {limits.max_depth} levels deep (PolicyLimits.max_depth)"


def _check_top_level(data: Any, source: str | None) -> None:
    if not isinstance(data, Mapping):
        kind = type(data).__name__ if data is not None else "an empty document"
        raise PolicyError(f"expected a mapping at the top level, found {kind}", source=source)


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {preview(key)}")
        out[key] = value
    return out


def _check_number(text: str, unit: str = "characters", mark: yaml.Mark | None = None) -> str:
    if len(text) > MAX_NUMBER_CHARS:
        raise _LimitExceeded(f"a number of {len(text)} {unit} (at most {MAX_NUMBER_CHARS})", mark)
    return text


def _json_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON value")


def _depth(data: Any) -> int:
    """Nesting depth of lists and dicts (iterative: ``data`` may be deep)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in value)
    return deepest


class _PolicyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and stays within :class:`PolicyLimits`.

    Depth and aliases are checked while the document is composed into nodes, before
    anything is constructed, so an alias bomb never grows: PyYAML shares an aliased
    node, and the values an alias stands for are counted from the node, once per node.
    """

    def __init__(self, text: str, limits: PolicyLimits) -> None:
        super().__init__(text)
        self.limits = limits
        self._depth = 0
        self._aliases = 0
        self._alias_values = 0
        self._open_anchors: set[str] = set()
        self._sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, height)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            return self._compose_alias(event, parent, index)
        if not isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > self.limits.max_depth:
            raise _LimitExceeded(_too_deep(self.limits), event.start_mark)
        anchor = event.anchor
        if anchor is not None:
            self._open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open_anchors.discard(anchor)

    def _compose_alias(self, event: yaml.AliasEvent, parent: yaml.Node | None, index: Any) -> Any:
        limits, mark = self.limits, event.start_mark
        self._aliases += 1
        if self._aliases > limits.max_aliases:
            raise _LimitExceeded(
                f"more than {limits.max_aliases} YAML aliases (PolicyLimits.max_aliases)", mark
            )
        if event.anchor in self._open_anchors:
            raise _LimitExceeded(f"alias *{_clip(event.anchor)} refers to a node it is in", mark)
        node = super().compose_node(parent, index)  # the anchored node (or undefined alias)
        values, height = self._size(node)
        if self._depth + height > limits.max_depth:
            raise _LimitExceeded(_too_deep(limits), mark)
        self._alias_values += values
        if self._alias_values > limits.max_alias_values:
            raise _LimitExceeded(
                f"YAML aliases expand to more than {limits.max_alias_values} values "
                "(PolicyLimits.max_alias_values)",
                mark,
            )
        return node

    def _size(self, node: yaml.Node) -> tuple[int, int]:
        """Values ``node`` stands for, aliases expanded, and its nesting height (recursion is
        bounded: every composed node is at most ``max_depth`` high)."""
        known = self._sizes.get(id(node))
        if known is not None:
            return known
        values, height = 1, 0
        if isinstance(node, yaml.SequenceNode):
            children: list[yaml.Node] = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        for child in children:
            v, h = self._size(child)
            values += v
            height = max(height, h + 1)
        self._sizes[id(node)] = (values, height)
        return values, height


def _clip(text: str | None, limit: int = 40) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "…"


def _construct_mapping(loader: _PolicyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a key must be a scalar, not a {type(key).__name__}",
                key_node.start_mark,
            ) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {preview(key)}", key_node.start_mark
            )
        seen[key] = loader.construct_object(value_node, deep=True)
    return seen


def _bounded_number(construct: Any) -> Any:
    """Wrap a scalar constructor so a number literal cannot be longer than it needs."""

    def bounded(loader: _PolicyLoader, node: yaml.ScalarNode) -> Any:
        _check_number(node.value, mark=node.start_mark)
        return construct(loader, node)

    return bounded


_PolicyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _not_a_policy_type(loader: _PolicyLoader, node: yaml.Node) -> Any:
    raise yaml.constructor.ConstructorError(
        None,
        None,
        f"{node.tag.rsplit(':', 1)[-1]!r} values have no place in a policy",
        node.start_mark,
    )


# YAML types beyond JSON's: a set would even make the policy hash vary between runs
for _tag in ("set", "omap", "pairs", "binary"):
    _PolicyLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _not_a_policy_type)
for _tag in ("int", "float"):
    _construct = getattr(yaml.SafeLoader, f"construct_yaml_{_tag}")
    _PolicyLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _bounded_number(_construct))
