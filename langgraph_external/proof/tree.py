"""The log's Merkle tree: roots, inclusion proofs and consistency proofs (RFC 9162).

The hashing and the verification live in :mod:`langgraph_external.proof.verify` (the
auditor's verifier, which imports nothing of ours); this module makes what it checks,
from the leaf hashes the ledger keeps (``log_leaves``), and keeps the log's right edge
(:func:`frontier_root`, what ``log_state.frontier`` holds) in step with it.

Example:
    >>> from langgraph_external.proof.verify import verify_consistency, verify_inclusion
    >>> leaves = [leaf_hash(bytes([i])) for i in range(7)]
    >>> root = tree_root(leaves)
    >>> verify_inclusion(5, 7, leaves[5], inclusion_proof(leaves, 5), root)
    True
    >>> verify_consistency(3, 7, tree_root(leaves[:3]), root, consistency_proof(leaves, 3))
    True
    >>> frontier_root(frontier_of(leaves)) == root
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from langgraph_external.proof.verify import leaf_hash, node_hash, tree_root

__all__ = [
    "consistency_proof",
    "frontier_of",
    "frontier_root",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "tree_root",
]


def _split(n: int) -> int:
    """The largest power of two below ``n`` (``n`` > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """The audit path of leaf ``index`` in the tree of ``leaves`` (RFC 9162 §2.1.3.1)."""
    if not 0 <= index < len(leaves):
        raise ValueError(f"leaf {index} is not in a tree of {len(leaves)} leaves")
    path: list[bytes] = []
    lo, hi, m = 0, len(leaves), index
    while hi - lo > 1:
        k = _split(hi - lo)
        if m < k:
            path.append(tree_root(leaves[lo + k : hi]))
            hi = lo + k
        else:
            path.append(tree_root(leaves[lo : lo + k]))
            lo, m = lo + k, m - k
    path.reverse()  # from the leaf up
    return path


def consistency_proof(leaves: Sequence[bytes], first: int) -> list[bytes]:
    """The proof that the tree of ``leaves`` extends its first ``first`` leaves (RFC 9162
    §2.1.4.1); empty when ``first`` is 0 or all of them."""
    n = len(leaves)
    if not 0 <= first <= n:
        raise ValueError(f"a tree of {n} leaves has no prefix of {first}")
    if first in (0, n):
        return []
    proof: list[bytes] = []
    lo, hi, m, complete = 0, n, first, True
    while m != hi - lo:
        k = _split(hi - lo)
        if m <= k:
            proof.append(tree_root(leaves[lo + k : hi]))
            hi = lo + k
        else:
            proof.append(tree_root(leaves[lo : lo + k]))
            lo, m, complete = lo + k, m - k, False
    if not complete:
        proof.append(tree_root(leaves[lo:hi]))
    proof.reverse()
    return proof


def frontier_of(leaves: Sequence[bytes]) -> list[bytes]:
    """The roots of the perfect subtrees along the log's right edge, largest first (one
    per set bit of the size): what an append needs, and all the root needs."""
    out: list[bytes] = []
    for i, h in enumerate(leaves):
        k = i
        while k & 1:
            h = node_hash(out.pop(), h)
            k >>= 1
        out.append(h)
    return out


def frontier_root(frontier: Sequence[bytes]) -> bytes:
    """The tree hash of a log from its right edge (:func:`frontier_of`)."""
    if not frontier:
        return tree_root([])
    return reduce(lambda acc, h: node_hash(h, acc), reversed(frontier[:-1]), frontier[-1])
