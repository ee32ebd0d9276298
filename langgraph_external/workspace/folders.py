"""Which folder each thread of a workspace has: the current name, or the one it kept.

A thread's folder is :func:`~langgraph_external.record.locations.encode_thread_id` of its
id, except for a thread recorded before that rule: it keeps its old folder and namespace
file names (:func:`~langgraph_external.record.locations.legacy_thread_folder`), because
its sealed checkpoint events name them, so a thread is never split across two. Which
rule a thread has is the ledger's word when it was given (:meth:`ThreadFolders.file_under`,
:meth:`ThreadFolders.locate`: the projection, ``lgx verify``, the UI), otherwise whichever
folder exists (a reader of the files alone).

Example:
    >>> folders = ThreadFolders(lambda name: name == "~onyc2qi")  # what exists
    >>> folders.folder("sp-A"), folders.folder("sp-B")
    ('~onyc2qi', 'sp-!b')
    >>> folders.file_under("sp-B", legacy=True)
    >>> folders.folder("sp-B"), folders.is_legacy("sp-B")
    ('~onyc2qq', True)
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from langgraph_external.record.locations import (
    encode_thread_id,
    legacy_thread_folder,
    thread_folder,
)

__all__ = ["ThreadFolders"]

_KEPT = 100_000  # threads remembered at most (what is dropped is looked up again)


class ThreadFolders:
    """The folder names of one workspace's threads, remembered once known.

    Args:
        exists: whether a folder of that name exists under ``threads/``.
    """

    def __init__(self, exists: Callable[[str], bool]) -> None:
        self._exists = exists
        # thread -> (folder name, old rule or not (None: the files do not tell: a plain
        # id, named alike by both rules), whether the ledger said so)
        self._known: dict[str, tuple[str, bool | None, bool]] = {}

    def folder(self, thread_id: str) -> str:
        """The name of ``thread_id``'s folder under ``threads/`` (see the module docs)."""
        known = self._known.get(thread_id)
        if known is not None:
            return known[0]
        name = encode_thread_id(thread_id)
        old = legacy_thread_folder(thread_id)
        if old == name:  # a plain id: one folder either way (its namespace files tell)
            if self._exists(name):
                self._remember(thread_id, name, None, said=False)
            return name
        for found, legacy in ((old, True), (name, False)):
            if self._exists(found):
                self._remember(thread_id, found, legacy, said=False)
                return found
        return name

    def is_legacy(self, thread_id: str) -> bool | None:
        """Whether ``thread_id`` keeps the names of the old rule; ``None``: the files do
        not tell (a plain id whose folder both rules name alike, the ledger not asked)."""
        self.folder(thread_id)
        known = self._known.get(thread_id)
        return known[1] if known is not None else False

    def file_under(self, thread_id: str, *, legacy: bool) -> None:
        """Take the ledger's word on ``thread_id``'s names: those of the old rule
        (``legacy``: the ledger's ``threads.legacy_names``) or the current ones."""
        self._remember(thread_id, thread_folder(thread_id, legacy=legacy), legacy, said=True)

    def locate(self, ledger: Any, thread_ids: Collection[str]) -> None:
        """Ask ``ledger`` (its ``legacy_named``) about the threads it has not said yet:
        one look-up for all of them; a ledger without it files every thread by the
        current rule."""
        unknown = [t for t in thread_ids if not self.known(t)]
        if not unknown:
            return
        lookup = getattr(ledger, "legacy_named", None)
        legacy = lookup(unknown) if lookup is not None else set()
        for tid in unknown:
            self.file_under(tid, legacy=tid in legacy)

    def known(self, thread_id: str) -> bool:
        """Whether the ledger's word on ``thread_id`` was given (:meth:`file_under`)."""
        known = self._known.get(thread_id)
        return known is not None and known[2]

    def found(self, thread_id: str, name: str) -> None:
        """``name`` under ``threads/`` is ``thread_id``'s folder (a listing found it)."""
        if not self.known(thread_id):
            plain = name == legacy_thread_folder(thread_id) == encode_thread_id(thread_id)
            legacy = None if plain else name != encode_thread_id(thread_id)
            self._remember(thread_id, name, legacy, said=False)

    def removed(self, thread_id: str) -> None:
        """The thread's folder was removed: what the files told is no longer known."""
        if not self.known(thread_id):
            self._known.pop(thread_id, None)

    def forget(self, thread_id: str) -> None:
        """Forget all that is known of ``thread_id`` (the ledger's word too)."""
        self._known.pop(thread_id, None)

    def _remember(self, thread_id: str, name: str, legacy: bool | None, *, said: bool) -> None:
        if len(self._known) > _KEPT:
            self._known.clear()
        self._known[thread_id] = (name, legacy, said)
