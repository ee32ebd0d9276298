"""Server-side rendering of ``lgx ui``'s pages and ``lgx timeline``'s file (Jinja2).

Templates autoescape everything; data for the page's script is embedded as JSON inside
``<script type="application/json">`` with ``<``, ``>`` and ``&`` escaped, so no recorded
text can end the element or become markup. A standalone page (``lgx timeline``) inlines
the stylesheet and the script and allows only that script, by its hash, in its
Content-Security-Policy.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, pass_context, select_autoescape
from markupsafe import Markup

from langgraph_external.read.envelopes import embedded_envelope
from langgraph_external.read.offloaded import references, shortened, shown_text
from langgraph_external.read.view_labels import KIND_NAMES, call_args, format_cost, messages_of
from langgraph_external.record.artifacts import is_ref
from langgraph_external.record.locations import thread_relpath

__all__ = [
    "asset",
    "environment",
    "fmt_ms",
    "render",
    "script_json",
    "thread_context",
]


def script_json(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` element (nothing can close it).

    Example:
        >>> script_json({"a": "</script>&"})
        '{"a":"\\\\u003c/script\\\\u003e\\\\u0026"}'
    """
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str).translate(
        _SCRIPT_ESCAPES
    )


_SCRIPT_ESCAPES = str.maketrans({c: f"\\u{ord(c):04x}" for c in "&<>\u2028\u2029"})
"""What :func:`script_json` writes as ``\\uXXXX``: what could end the element or the script."""


def fmt_ms(value: Any) -> str:
    """A duration in milliseconds as people read it.

    Example:
        >>> fmt_ms(0.4), fmt_ms(12.34), fmt_ms(1500), fmt_ms(95_000), fmt_ms(None)
        ('0.40 ms', '12.3 ms', '1.50 s', '1.6 min', '–')
    """
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "–"
    v = float(value)
    if v >= 3_600_000:
        return f"{v / 3_600_000:.1f} h"
    if v >= 60_000:
        return f"{v / 60_000:.1f} min"
    if v >= 1000:
        return f"{v / 1000:.2f} s"
    return f"{v:.1f} ms" if v >= 10 else f"{v:.2f} ms"


def _when(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    return str(value.strftime("%Y-%m-%d %H:%M:%S"))


def _without_messages(value: Any) -> Any:
    """A node update or run input/output without its messages (shown as chat); ``None``
    when nothing else is left."""
    if not isinstance(value, Mapping):
        return value
    if "goto" in value and isinstance(value.get("update"), Mapping):  # a Command
        inner = _without_messages(value["update"])
        rest = {k: v for k, v in value.items() if k != "update" and v is not None}
        if inner is not None:
            rest["update"] = inner
        return rest or None
    rest = {k: v for k, v in value.items() if k != "messages"}
    return rest or None


SHORTENED = "\n… [shortened: {size} bytes in all; the whole value is one click away] …\n"
"""What stands between the head and the tail of an offloaded value shown as one text."""


def _unref(value: Any) -> Any:
    """``value`` with each artifact reference as its head … tail (one string)."""
    if is_ref(value):
        return shown_text(value, SHORTENED)
    if isinstance(value, Mapping):
        return {k: _unref(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_unref(v) for v in value]
    return value


def _pretty(value: Any) -> str:
    value = _unref(value)  # a reference is one string
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


@pass_context
def artifact_href(ctx: Any, thread_id: Any, ref: Mapping[str, Any]) -> str | None:
    """The URL of ``/artifact`` for ``ref`` of ``thread_id`` (``None`` in a standalone file:
    no server to ask)."""
    if ctx.get("standalone"):
        return None
    params = {"thread": str(thread_id), "sha": str(ref.get("$artifact"))}
    if "$in" in ref:  # a value of an older record's whole payload: its path there
        params["at"] = json.dumps(ref["$in"], ensure_ascii=False, separators=(",", ":"))
    return f"{ctx.get('root') or ''}/artifact?{urlencode(params)}"


@pass_context
def artifact_where(ctx: Any, thread_id: Any, ref: Mapping[str, Any]) -> str:
    """Where the whole of ``ref`` is, in the workspace (``folder``: the thread's folder
    relative to the root, when the page knows it — a thread recorded before readable
    folder names keeps its old one)."""
    folder = ctx.get("folder") or thread_relpath(str(thread_id))
    where = f"{folder}/artifacts/{ref.get('$artifact')}"
    if "$in" in ref:
        where += " (the payload's " + ".".join(map(str, ref["$in"] or ())) + ")"
    return where


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The Jinja2 environment of the package's templates (autoescaping on)."""
    env = Environment(
        loader=PackageLoader("langgraph_external.ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ms"] = fmt_ms
    env.filters["cost"] = lambda v, currency="USD": format_cost(v, currency)
    env.filters["when"] = _when
    env.filters["pretty"] = _pretty
    env.filters["args"] = lambda a: call_args(a, 200)
    env.filters["messages"] = messages_of
    env.filters["without_messages"] = _without_messages
    env.filters["shortened"] = shortened
    env.filters["references"] = lambda v: list(references(v))
    env.tests["offloaded"] = is_ref
    env.globals["kind_names"] = KIND_NAMES
    env.globals["artifact_href"] = artifact_href
    env.globals["artifact_where"] = artifact_where
    return env


def asset(name: str) -> str:
    """The text of a file of ``langgraph_external/ui/static``."""
    return resources.files("langgraph_external.ui").joinpath("static", name).read_text("utf-8")


def _ticks(end: float, fmt: Any, n: int = 5) -> list[tuple[float, str]]:
    return [(100.0 * i / (n - 1), fmt(end * i / (n - 1))) for i in range(n)]


def thread_context(
    view: Mapping[str, Any],
    envelopes: Sequence[Mapping[str, Any]] | None,
    *,
    verification: Mapping[str, Any] | None = None,
    memory_texts: Mapping[str, str] | None = None,
    memory_queries: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Template values of a thread page."""
    for r in view["rows"]:  # what each row's line needs, formatted once
        r["took"] = fmt_ms(r["t1"] - r["t0"]) if r["t1"] > r["t0"] else ""
        r["mark"] = " mark" if r["t1"] == r["t0"] and r["s1"] == r["s0"] else ""
        r["seq_list"] = ",".join(map(str, r["seqs"]))
        (tl, tw), (sl, sw) = r["x_time"], r["x_seq"]
        r["bar"] = f"--tl:{tl:.3f}%;--tw:{tw:.3f}%;--sl:{sl:.3f}%;--sw:{sw:.3f}%"
    seqs = [r["s0"] for r in view["rows"]] + [r["s1"] for r in view["rows"]]
    first, last = (min(seqs), max(seqs)) if seqs else (0, 1)
    span = max(last - first, 1)
    return {
        "view": view,
        "verification": verification,
        "memory_texts": memory_texts or {},
        "memory_queries": memory_queries or {},
        "ticks_time": _ticks(float(view["end_ms"]), fmt_ms),
        "ticks_seq": [(p, f"seq {round(first + span * p / 100)}") for p, _ in _ticks(1.0, str)],
        "events_json": None
        if envelopes is None
        else Markup(
            script_json(
                {
                    "thread_id": view["thread_id"],
                    "envelopes": [embedded_envelope(e) for e in envelopes],
                }
            )
        ),
    }


def render(template: str, *, standalone: bool = False, root: str = "", **values: Any) -> str:
    """Render one page; ``standalone`` inlines the stylesheet and the script."""
    ctx: dict[str, Any] = {"standalone": standalone, "root": root, "static": f"{root}/static"}
    if standalone:
        js = asset("lgx.js")
        digest = base64.b64encode(hashlib.sha256(js.encode()).digest()).decode()
        ctx.update(css=Markup(asset("lgx.css")), js=Markup(js), script_hash=f"sha256-{digest}")
    ctx.update(values)
    return environment().get_template(template).render(ctx)
