"""The state machine a policy declares, as the static check and the diagram read it.

``START``/``END`` are spelled the way LangGraph spells them; :class:`DeclaredTransitions`
is the part of a :class:`~langgraph_external.guards.TransitionPolicy` that
:func:`~langgraph_external.guards.check` and :func:`~langgraph_external.guards.mermaid`
need (its states and transitions), so they depend on that, not on the policy model.
"""

from __future__ import annotations

from typing import Protocol

START = "__start__"
END = "__end__"
_ALIASES = {"START": START, "END": END}


def normalize_state(name: str) -> str:
    """Spell ``START``/``END`` the way LangGraph does (``__start__``/``__end__``).

    Example:
        >>> normalize_state("START"), normalize_state("END"), normalize_state("agent")
        ('__start__', '__end__', 'agent')
    """
    return _ALIASES.get(name, name)


def state_label(state: str) -> str:
    """How a report or a diagram names a state: ``START``/``END`` as written in a policy.

    Example:
        >>> state_label("__start__"), state_label("agent")
        ('START', 'agent')
    """
    return {START: "START", END: "END"}.get(state, state)


class DeclaredTransitions(Protocol):
    """What the static check and the diagram read of a policy."""

    @property
    def name(self) -> str | None:
        """The policy's name, if it has one."""

    @property
    def hash(self) -> str:
        """sha256 (hex) of the policy's canonical content."""

    @property
    def states(self) -> list[str]:
        """Declared states, ``START`` first and ``END`` last."""

    def allows(self, source: str, target: str) -> bool:
        """Whether ``source -> target`` is a declared transition."""

    def targets(self, source: str) -> frozenset[str]:
        """Declared targets of ``source``."""
