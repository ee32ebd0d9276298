"""The readable views of the workspace mirror: exact bytes decoded, rendered and redacted
for people (checkpoint and writes lines, ``state.json``), and the keyed tag of a
``state.json``. Readable views never block the exact mirror.

Example:
    >>> from langgraph_external.workspace.files import Workspace
    >>> import tempfile
    >>> views = ReadableViews(Workspace(tempfile.mkdtemp()), lambda *a: None)
    >>> views.render("t", {"type": "empty"}) is None
    True
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_external.record.crypto import DecryptionError, WorkspaceCipher
from langgraph_external.record.events import Event
from langgraph_external.record.keys import state_tag
from langgraph_external.record.processors import Redactor
from langgraph_external.record.redaction import redact_at
from langgraph_external.record.render import to_readable
from langgraph_external.workspace.files import Workspace, dumps_clean
from langgraph_external.workspace.lines import parse_json

__all__ = ["INTERNAL_CHANNELS", "RENDER_MAX", "ReadableViews", "state_tag"]

_CACHE = 4096
_BYTES_BUDGET = 2 * 1024 * 1024  # exact bytes kept for rendering readable views
_READABLE_CACHE = 256  # rendered values, each from at most RENDER_MAX bytes
INTERNAL_CHANNELS = ("__", "branch:")
"""Prefixes of LangGraph's own channels: exact copies only, no rendering."""
# a checkpoint line renders changed channels up to this size; a larger value (a long
# message list) is what its writes lines already render, so the line refers to them
# instead of rendering the whole value again at every step
RENDER_MAX = 16 * 1024

DocReader = Callable[[str, str, str], "dict[str, Any] | None"]


class ReadableViews:
    """Decodes, renders and redacts stored values of one workspace (caches bounded).

    Args:
        workspace: where blob files are read from.
        read_doc: ``(thread, ns, checkpoint_id) -> checkpoint line`` (inline bytes).
        serde: decodes exact bytes (the saver's serializer).
        redactor: applied to every readable view.
        cipher: opens exact copies sealed at the source; tags ``state.json``.
    """

    def __init__(
        self,
        workspace: Workspace,
        read_doc: DocReader,
        *,
        serde: SerializerProtocol | None = None,
        redactor: Redactor | None = None,
        cipher: WorkspaceCipher | None = None,
    ) -> None:
        self.ws = workspace
        self.read_doc = read_doc
        self.serde: SerializerProtocol = serde or JsonPlusSerializer()
        self.redactor = redactor
        self.cipher = cipher
        self._readable: OrderedDict[str, Any] = OrderedDict()  # sha -> readable value
        self._bytes: OrderedDict[str, bytes] = OrderedDict()  # sha -> bytes (this batch+)
        self._bytes_size = 0

    def remember_bytes(self, sha: str, data: bytes) -> None:
        """Keep ``data`` (the stored copy named ``sha``) for rendering, within budget."""
        # bounded by size, not only count: a long chat's message list is large; values
        # above RENDER_MAX are blob files already, read back when state.json needs them
        if len(data) > RENDER_MAX:
            return
        if sha in self._bytes:
            self._bytes.move_to_end(sha)
            return
        self._bytes[sha] = data
        self._bytes_size += len(data)
        while self._bytes and (len(self._bytes) > _CACHE or self._bytes_size > _BYTES_BUDGET):
            _, old = self._bytes.popitem(last=False)
            self._bytes_size -= len(old)

    def open(self, ref: dict[str, Any], data: bytes) -> bytes:
        """Plain bytes of a reference's stored copy (sealed at the source when ``enc``)."""
        if not ref.get("enc"):
            return data
        if self.cipher is None:
            raise DecryptionError("encrypted exact copy and no key to open it")
        return self.cipher.decrypt(data, str(ref["sha256"]).encode())

    def load_bytes(self, tid: str, ns: str, ref: dict[str, Any]) -> bytes:
        """Plain bytes of ``ref`` (kept, inline in its checkpoint line, or a blob file)."""
        sha = ref["sha256"]
        if sha in self._bytes:
            return self.open(ref, self._bytes[sha])
        if ref.get("inline") and ref.get("in"):
            doc = self.read_doc(tid, ns, ref["in"]) or {}
            return self.open(ref, base64.b64decode(doc["blobs"][sha]))
        return self.open(ref, self.ws.read_bytes(self.ws.blob_path(tid, sha)))

    def render(self, tid: str, ref: dict[str, Any], ns: str = "") -> Any:
        """The readable value of ``ref`` (``$undecodable`` when it cannot be decoded)."""
        sha = ref.get("sha256")
        if sha is None:
            return None if ref.get("type") == "empty" else {"$unmirrored": ref.get("version")}
        if sha in self._readable:
            self._readable.move_to_end(sha)
            return self._readable[sha]
        try:
            data = self.load_bytes(tid, ns, ref)
            value = to_readable(self.serde.loads_typed((ref["type"], data)))
        except Exception as exc:  # readable views never block the exact mirror
            value = {"$undecodable": f"{type(exc).__name__}: {exc}"}
        if (ref.get("size") or 0) > RENDER_MAX:
            return value  # a long message list renders to megabytes: not kept
        self._readable[sha] = value
        while len(self._readable) > _READABLE_CACHE:
            self._readable.popitem(last=False)
        return value

    def render_update(self, tid: str, ref: dict[str, Any], ns: str) -> Any:
        """:meth:`render`, or a reference to the writes lines for a large value."""
        size = ref.get("size") or 0
        if size > RENDER_MAX:
            return {"$large": {"size": size, "sha256": ref.get("sha256"), "see": "writes"}}
        return self.render(tid, ref, ns)

    def redact(self, value: Any) -> Any:
        """``value`` through the redactor (if any)."""
        return value if self.redactor is None else self.redactor(value)[0]

    def redact_at(self, key: Any, value: Any) -> Any:
        """``value`` redacted as it sits under ``key`` (a channel) in the whole state."""
        return value if self.redactor is None else redact_at(self.redactor, [str(key)], value)[0]

    def writes_lines(self, tid: str, e: Event) -> list[dict[str, Any]]:
        """The checkpoint log's lines of a ``writes`` event, rendered and redacted."""
        inline = (e.detail or {}).get("inline") or {}
        lines = []
        for w in e.payload.get("writes", []):
            line = {
                "record": "write",
                "checkpoint_id": e.checkpoint_id,
                "task_id": e.task_id,
                "task_path": e.payload.get("task_path", ""),
                "node": e.node,
                "seq": e.seq,
                **w,
            }
            if w.get("inline") and w.get("sha256") in inline:
                line["b64"] = inline[w["sha256"]]
            # redacted under its channel's name, as state.json redacts it: a channel named
            # ``password`` is hidden whole, though its value alone looks like nothing
            line["value"] = self.redact_at(w.get("channel"), self.render(tid, w, e.checkpoint_ns))
            lines.append(line)
        return lines

    def state_doc(
        self, tid: str, checkpoint_id: str, step: int | None, full: dict[str, Any]
    ) -> dict[str, Any]:
        """The ``state.json`` of checkpoint ``checkpoint_id`` (channel map ``full``)."""
        values = {
            ch: self.render(tid, ref)
            for ch, ref in full.items()
            if not ch.startswith(INTERNAL_CHANNELS)
        }
        doc: dict[str, Any] = {
            "thread_id": tid,
            "checkpoint_id": checkpoint_id,
            "step": step,
            "updated": datetime.now(timezone.utc).isoformat(),
            "values": parse_json(dumps_clean(self.redact(values))),
        }
        if self.cipher is not None:
            doc["tag"] = state_tag(self.cipher, doc)
        return doc
