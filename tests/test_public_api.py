"""The public surface is a decision: every name a user imports, and every signature, is
pinned in ``tests/data/public_api.json``. A change to it fails here until the file is
updated on purpose (``LGX_UPDATE_PUBLIC_API=1``) — and a CHANGELOG line says what changed.
Import paths that moved keep working, with a warning, until they go."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).parent / "data" / "public_api.json"
PUBLIC = [
    "langgraph_external",
    "langgraph_external.checkpointers",
    "langgraph_external.callbacks",
    "langgraph_external.guards",
    "langgraph_external.memory_adapters",
    "langgraph_external.replay",
    "langgraph_external.exporters",
    "langgraph_external.testing",
]
MOVED = {
    "langgraph_external.restore": "langgraph_external.ops.restore",
    "langgraph_external.redaction": "langgraph_external.record.redaction",
    "langgraph_external.prices": "langgraph_external.read.prices",
    "langgraph_external.inspection": "langgraph_external.read.inspection",
    "langgraph_external.diff": "langgraph_external.read.diff",
}


def _signature(obj: Any) -> str:
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        text = str(inspect.signature(target))
    except (TypeError, ValueError):
        return type(obj).__name__
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def _our_methods(cls: type) -> dict[str, Any]:
    """The public methods ``cls`` has from our classes, inherited ones included (where a
    method is defined is an implementation detail; that a user can call it is not)."""
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("langgraph_external"):
            for meth, member in vars(klass).items():
                if not meth.startswith("_") and inspect.isfunction(member):
                    out[meth] = member
    return out


def surface() -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for name in PUBLIC:
        module = importlib.import_module(name)
        out[name] = {}
        for attr in sorted(module.__all__):
            obj = getattr(module, attr)
            kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "value"
            out[name][attr] = f"{kind} {_signature(obj)}" if kind != "value" else kind
            if inspect.isclass(obj) and attr in ("External", "ExternalCheckpointer"):
                for meth, member in sorted(_our_methods(obj).items()):
                    out[name][f"{attr}.{meth}"] = f"method {_signature(member)}"
    return out


def test_the_public_surface_is_what_was_decided() -> None:
    got = surface()
    if os.environ.get("LGX_UPDATE_PUBLIC_API"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    expected = json.loads(GOLDEN.read_text())
    for module in PUBLIC:
        added = sorted(set(got[module]) - set(expected[module]))
        removed = sorted(set(expected[module]) - set(got[module]))
        assert not added and not removed, f"{module}: added {added}, removed {removed}"
        for name, sig in expected[module].items():
            assert got[module][name] == sig, f"{module}.{name} changed"


def test_every_public_module_lists_its_lazy_names() -> None:
    for name in PUBLIC:
        module = importlib.import_module(name)
        assert set(module.__all__) <= set(dir(module)), name


def test_restore_thread_is_a_top_level_name() -> None:
    from langgraph_external import restore_thread
    from langgraph_external.ops.restore import restore_thread as where_it_lives

    assert restore_thread is where_it_lives


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_import_path_works_and_warns(old: str) -> None:
    import sys

    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert any(
        issubclass(w.category, DeprecationWarning) and MOVED[old] in str(w.message) for w in seen
    )
    new = importlib.import_module(MOVED[old])
    for name in module.__all__:
        assert getattr(module, name) is getattr(new, name)


@pytest.mark.parametrize("name", ["Pipeline", "SinkError", "ChainConflictError"])
def test_a_deprecated_top_level_name_works_and_warns(name: str) -> None:
    import langgraph_external

    with pytest.warns(DeprecationWarning, match=name):
        assert getattr(langgraph_external, name) is not None
    assert name not in langgraph_external.__all__


@pytest.mark.parametrize(
    "module", ["langgraph_external.callbacks", "langgraph_external.sources.callbacks"]
)
def test_the_async_handler_name_is_the_handler_with_a_warning(module: str) -> None:
    from langgraph_external.callbacks import AuditCallbackHandler

    where = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.AsyncAuditCallbackHandler"):
        assert where.AsyncAuditCallbackHandler is AuditCallbackHandler
    with pytest.warns(DeprecationWarning):
        exec(f"from {module} import AsyncAuditCallbackHandler", {})
    assert "AsyncAuditCallbackHandler" not in where.__all__
    assert "AsyncAuditCallbackHandler" not in dir(where)
    with pytest.raises(AttributeError):
        where.NoSuchHandler  # noqa: B018
