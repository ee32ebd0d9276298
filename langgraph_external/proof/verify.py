"""Verify an agent's record offline: bundles, signed log heads and consistency proofs.

This module is the auditor's verifier. It imports nothing of langgraph-external — only
the standard library and ``cryptography`` (for Ed25519) — so it can be copied to a
machine that has neither the package, the database nor the deployment key, and run
there with the deployment's published public key::

    python verify.py bundle.json --key 'langgraph-external-3f9a+1a2b3c4d+AUn...'
    python verify.py consistency.json --key 'langgraph-external-3f9a+1a2b3c4d+AUn...'

What it checks (see docs/security.md, "The auditor's proof"):

* **The log.** Every time the sealer moves a thread's head it appends a leaf — thread,
  sequence number, head hash, time — to one append-only Merkle log per deployment, in
  the same transaction. The tree is RFC 9162's (Certificate Transparency v2): a leaf
  hashes as ``SHA-256(0x00 || leaf)``, an interior node as ``SHA-256(0x01 || left ||
  right)``; inclusion and consistency proofs are RFC 9162's audit paths.
* **Signed heads.** The sealing side signs the tree head (size, root hash, time) with
  Ed25519, as a C2SP *signed note* holding a *tlog checkpoint* (the format of Go's
  checksum database and Sigstore's logs): the origin line, the size, the base64 root,
  then ``time <RFC 3339>``; each signature line is ``— <key name> base64(key hash ||
  signature)``; a verifier key is written ``<name>+<key hash hex>+base64(0x01 ||
  public key)``.
* **Bundles.** A thread's events as the exact text that was hashed, chained by ``prev``;
  the log leaf of its newest head; the inclusion proof of that leaf; the signed head.
  Optionally the exact checkpoint bytes, each with the salt that opens its commitment
  in the record (``SHA-256(salt || bytes)``).

Every check that fails is named in the verdict; the exit status is 0 when everything
verified, 1 when something did not, 2 when the input could not be read.

Example:
    >>> leaves = [leaf_hash(leaf_bytes("t", i, "h%d" % i, 0)) for i in range(1, 6)]
    >>> root = tree_root(leaves)
    >>> verify_inclusion(2, 5, leaves[2], [leaves[3], node_hash(leaves[0], leaves[1]),
    ...                  leaves[4]], root)
    True
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BUNDLE_FORMAT",
    "CONSISTENCY_FORMAT",
    "Head",
    "Verdict",
    "VerifierKey",
    "leaf_bytes",
    "leaf_hash",
    "node_hash",
    "parse_head",
    "parse_key",
    "tree_root",
    "verify_bundle",
    "verify_consistency",
    "verify_consistency_file",
    "verify_inclusion",
]

BUNDLE_FORMAT = "lgx-bundle/1"
CONSISTENCY_FORMAT = "lgx-consistency/1"
LEAF_PREFIX = b"lgx-head/1\n"
SIGNATURE_DASH = "\u2014 "  # "— ", as signed notes write it
ED25519 = 0x01  # the signed-note algorithm byte of Ed25519 keys


# -- RFC 9162 hashing -----------------------------------------------------------------
def leaf_bytes(thread_id: str, seq: int, head_hash: str, ts_us: int) -> bytes:
    """The leaf of one head move: thread, sequence number, head hash, time (µs since the
    epoch, UTC). The thread id is length-prefixed, so no two leaves share their bytes.

    Example:
        >>> leaf_bytes("t-1", 3, "ab", 1)
        b'lgx-head/1\\n3:t-1\\n3\\nab\\n1\\n'
    """
    t = thread_id.encode("utf-8")
    return b"%s%d:%s\n%d\n%s\n%d\n" % (LEAF_PREFIX, len(t), t, seq, head_hash.encode(), ts_us)


def leaf_hash(data: bytes) -> bytes:
    """RFC 9162 leaf hash: ``SHA-256(0x00 || data)``."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 9162 interior node hash: ``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def tree_root(leaves: Sequence[bytes]) -> bytes:
    """The Merkle tree hash of ``leaves`` (leaf hashes), RFC 9162 §2.1.1.

    Example:
        >>> tree_root([]).hex()[:16]
        'e3b0c44298fc1c14'
    """
    if not leaves:
        return hashlib.sha256(b"").digest()
    level = list(leaves)
    # hashing pairs level by level gives the same tree as RFC 9162's split at the
    # largest power of two below n: an odd node out is carried up unchanged
    while len(level) > 1:
        nxt = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _climb(fn: int, sn: int, start: bytes, path: Sequence[bytes]) -> tuple[bytes, bytes] | None:
    """RFC 9162's walk up an audit ``path`` from the node ``start`` at index ``fn`` of a
    level whose last index is ``sn``: ``(root of the nodes on the left edge, root)``, or
    ``None`` when the path does not end at the root."""
    fr = sr = start
    for c in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return (fr, sr) if sn == 0 else None


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> bool:
    """Whether ``proof`` shows the leaf hash ``leaf`` at ``index`` in the tree of ``size``
    leaves whose root is ``root`` (RFC 9162 §2.1.3.2)."""
    if index < 0 or index >= size:
        return False
    found = _climb(index, size - 1, leaf, proof)
    return found is not None and found[1] == root


def verify_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Whether ``proof`` shows that the tree of ``second`` leaves extends the tree of
    ``first`` leaves — every leaf of the first is in the second, in place (RFC 9162
    §2.1.4.2)."""
    if first < 0 or second < first:
        return False
    if first == second:
        return not proof and first_root == second_root
    if first == 0:
        return not proof
    path = list(proof)
    if not path:
        return False
    if first & (first - 1) == 0:  # an exact power of two: the first tree is a subtree
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    return _climb(fn, sn, path[0], path[1:]) == (first_root, second_root)


# -- keys and signed heads --------------------------------------------------------------
@dataclass(frozen=True)
class VerifierKey:
    """A published Ed25519 verifier key: ``<name>+<key hash hex>+base64(0x01 || key)``."""

    name: str
    key_hash: int
    public: bytes

    @property
    def text(self) -> str:
        """The key as it is published."""
        raw = base64.b64encode(bytes([ED25519]) + self.public).decode()
        return f"{self.name}+{self.key_hash:08x}+{raw}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature, message)
        except InvalidSignature:
            return False
        return True


def key_hash(name: str, public: bytes) -> int:
    """The signed-note key hash: the first 4 bytes of ``SHA-256(name || "\\n" || 0x01 ||
    public key)``, big-endian."""
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([ED25519]) + public).digest()
    return int.from_bytes(digest[:4], "big")


def parse_key(text: str) -> VerifierKey:
    """Read a published verifier key (raises ``ValueError`` naming what is wrong)."""
    parts = text.strip().split("+", 2)  # base64 may hold '+' itself
    if len(parts) != 3 or not parts[0]:
        raise ValueError("a verifier key reads <name>+<key hash>+<base64 key>")
    name, hexhash, raw = parts
    try:
        declared = int(hexhash, 16)
        blob = base64.b64decode(raw, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise ValueError(f"the verifier key is not well formed: {exc}") from None
    if len(blob) != 33 or blob[0] != ED25519:
        raise ValueError("the verifier key is not an Ed25519 key")
    if key_hash(name, blob[1:]) != declared:
        raise ValueError("the verifier key's hash does not match its name and key")
    return VerifierKey(name, declared, blob[1:])


@dataclass(frozen=True)
class Head:
    """A signed tree head: ``origin``, ``size``, ``root`` and ``time`` as signed, with the
    signature lines (key name, key hash, signature)."""

    origin: str
    size: int
    root: bytes
    time: str
    body: bytes
    signatures: tuple[tuple[str, int, bytes], ...]

    def signed_by(self, keys: Sequence[VerifierKey]) -> VerifierKey | None:
        """The first of ``keys`` whose valid signature the head carries."""
        for name, khash, sig in self.signatures:
            for k in keys:
                if k.name == name and k.key_hash == khash and k.verify(self.body, sig):
                    return k
        return None


def parse_head(text: str) -> Head:
    """Read a signed head (raises ``ValueError`` naming what is wrong)."""
    body, sep, sigs = text.partition("\n\n")
    if not sep:
        raise ValueError("a signed head is its text, a blank line, then signature lines")
    lines = body.split("\n")
    if len(lines) < 3:
        raise ValueError("a signed head needs an origin, a size and a root hash")
    origin, size_text, root_text = lines[0], lines[1], lines[2]
    time = next((ln[5:] for ln in lines[3:] if ln.startswith("time ")), "")
    try:
        size = int(size_text)
        root = base64.b64decode(root_text, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise ValueError(f"the signed head's size or root is not well formed: {exc}") from None
    if size < 0 or len(root) != 32:
        raise ValueError("the signed head's size or root is out of range")
    signatures = []
    for line in sigs.split("\n"):
        if not line:
            continue
        if not line.startswith(SIGNATURE_DASH):
            raise ValueError(f"not a signature line: {line[:60]!r}")
        name, _, b64 = line[len(SIGNATURE_DASH) :].rpartition(" ")
        try:
            blob = base64.b64decode(b64, validate=True)
        except (ValueError, binascii.Error):
            raise ValueError(f"a signature is not base64: {line[:60]!r}") from None
        if len(blob) < 5:
            raise ValueError("a signature is too short")
        signatures.append((name, int.from_bytes(blob[:4], "big"), blob[4:]))
    return Head(origin, size, root, time, (body + "\n").encode(), tuple(signatures))


# -- verdicts ---------------------------------------------------------------------------
@dataclass
class Verdict:
    """What a verification found: ``problems`` empty means everything verified."""

    what: str
    facts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def report(self) -> str:
        """The verdict as text: VERIFIED or FAILED, then what was found."""
        lines = [f"{'VERIFIED' if self.ok else 'FAILED'}: {self.what}"]
        lines += [f"  {f}" for f in self.facts] + [f"  problem: {p}" for p in self.problems]
        return "\n".join(lines)


def _head(text: Any, keys: Sequence[VerifierKey], v: Verdict, label: str) -> Head | None:
    """Parse and check one signed head; a problem is added when it does not verify."""
    try:
        head = parse_head(str(text))
    except ValueError as exc:
        v.problems.append(f"{label}: {exc}")
        return None
    signer = head.signed_by(keys)
    if signer is None:
        names = ", ".join(f"{n}+{h:08x}" for n, h, _ in head.signatures) or "none"
        v.problems.append(
            f"{label} is not signed by a trusted key (signed by: {names}): forged, or "
            "from another deployment"
        )
        return None
    v.facts.append(
        f"{label}: log {head.origin}, {head.size} leaves, signed {head.time or '?'} by "
        f"{signer.name}+{signer.key_hash:08x}"
    )
    return head


def _hex_list(items: Any, what: str) -> list[bytes]:
    if not isinstance(items, list):
        raise ValueError(f"{what} is not a list")
    return [bytes.fromhex(str(x)) for x in items]


def _event_body(line: str) -> tuple[dict[str, Any], str]:
    """An event line as stored (``events.jsonl``) and the text its hash covers: the line
    without its own ``"hash"`` member (which the sealer placed before ``"kind"``)."""
    obj = json.loads(line)
    if not isinstance(obj, dict) or not isinstance(obj.get("hash"), str):
        raise ValueError("not an event line")
    member = f',"hash":"{obj["hash"]}"'
    if member not in line:
        raise ValueError("the event line is not in its hashed form")
    return obj, line.replace(member, "", 1)


def _commitments(events: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Content address -> commitment, from the exact-byte references the events carry."""
    out: dict[str, str] = {}

    def refs(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("sha256"), str) and isinstance(value.get("commit"), str):
                out[value["sha256"]] = value["commit"]
            value = list(value.values())
        if isinstance(value, list):
            for x in value:
                refs(x)

    for e in events:
        if e.get("kind") in ("checkpoint", "writes"):
            refs(e.get("payload"))
    return out


def verify_bundle(
    bundle: Mapping[str, Any], keys: Sequence[VerifierKey], origin: str | None = None
) -> Verdict:
    """Verify a thread's bundle against the trusted ``keys`` (and the log ``origin``).

    Checks each event's hash over its exact text and the chain of ``prev`` links, that
    the leaf names the newest event, the leaf's inclusion in the signed head, the head's
    signature, and every exact value against its commitment.
    """
    tid = bundle.get("thread_id")
    v = Verdict(f"bundle of thread {tid!r}")
    if bundle.get("format") != BUNDLE_FORMAT:
        v.problems.append(f"not a bundle of format {BUNDLE_FORMAT}")
        return v
    head = _head(bundle.get("head"), keys, v, "signed head")
    if head is not None and origin is not None and head.origin != origin:
        v.problems.append(f"the head is of log {head.origin!r}, not {origin!r}")
    events = _check_events(bundle.get("events"), tid, v)
    if events is None or not _check_leaf(bundle, tid, events[-1], head, v):
        return v
    values = bundle.get("values") or {}
    if isinstance(values, dict) and values:
        _check_values(values, _commitments(events), v)
    return v


def _check_events(lines: Any, tid: Any, v: Verdict) -> list[dict[str, Any]] | None:
    """The bundle's events, each hash over its exact text, each ``prev`` the hash before
    it (``None``: none, or one cannot be read)."""
    events: list[dict[str, Any]] = []
    if not isinstance(lines, list) or not lines:
        v.problems.append("the bundle holds no events")
        return None
    for i, line in enumerate(lines):
        try:
            obj, body = _event_body(str(line))
        except ValueError as exc:
            v.problems.append(f"event {i + 1} of the bundle cannot be read: {exc}")
            return None
        seq = obj.get("seq")
        if hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest() != obj["hash"]:
            v.problems.append(
                f"event seq {seq} ({obj.get('kind')}) was edited: its hash no "
                "longer matches its content"
            )
        if obj.get("thread_id") != tid:
            v.problems.append(f"event seq {seq} belongs to thread {obj.get('thread_id')!r}")
        if i and (seq != events[-1].get("seq", 0) + 1 or obj.get("prev") != events[-1]["hash"]):
            v.problems.append(
                f"the chain is broken before event seq {seq} (an event was "
                "removed, inserted or reordered)"
            )
        if i == 0 and seq != 1:
            v.facts.append(
                f"the record starts at seq {seq} (earlier events were deleted "
                "under a recorded tombstone)"
            )
        events.append(obj)
    v.facts.append(
        f"{len(events)} events, seq {events[0].get('seq')}..{events[-1].get('seq')}, "
        "each hash and link checked"
    )
    return events


def _check_leaf(
    bundle: Mapping[str, Any], tid: Any, last: dict[str, Any], head: Head | None, v: Verdict
) -> bool:
    """The leaf of the newest head names ``last``, and is in the signed head's log
    (``False``: the leaf or its proof cannot be read)."""
    leaf = bundle.get("leaf")
    if not isinstance(leaf, dict):
        v.problems.append("the bundle holds no log leaf")
        return False
    named = (leaf.get("thread_id"), leaf.get("seq"), leaf.get("hash"))
    if named != (tid, last.get("seq"), last.get("hash")):
        v.problems.append(
            f"the log leaf names thread {leaf.get('thread_id')!r} at seq {leaf.get('seq')} "
            f"with another head than the bundle's newest event (seq {last.get('seq')}): "
            "the thread was cut back or replaced"
        )
    try:
        fields = str(leaf["thread_id"]), int(leaf["seq"]), str(leaf["hash"]), int(leaf["ts_us"])
        lh = leaf_hash(leaf_bytes(*fields))
        proof = _hex_list(bundle.get("inclusion"), "the inclusion proof")
        index = int(leaf["index"])
    except (KeyError, TypeError, ValueError) as exc:
        v.problems.append(f"the log leaf or its proof cannot be read: {exc}")
        return False
    if head is not None:
        if verify_inclusion(index, head.size, lh, proof, head.root):
            v.facts.append(f"leaf {index} (seq {leaf['seq']}) is in the signed head's log")
        else:
            v.problems.append(
                f"leaf {index} is not in the signed head's log (the inclusion "
                "proof fails: the log or the leaf was changed)"
            )
    return True


def _check_values(values: dict[str, Any], commits: Mapping[str, str], v: Verdict) -> None:
    """Each exact value against the commitment its event carries."""
    bad = 0
    for address, item in values.items():
        try:
            data = base64.b64decode(item["data"], validate=True)
            salt = bytes.fromhex(item.get("salt") or "")
        except (KeyError, TypeError, ValueError, binascii.Error):
            v.problems.append(f"value {address[:16]}… cannot be read")
            bad += 1
            continue
        if address in commits:
            ok = hashlib.sha256(salt + data).hexdigest()[:32] == commits[address]
        else:  # a record without a deployment key addresses values by plain SHA-256
            ok = not salt and hashlib.sha256(data).hexdigest() == address
        if not ok:
            v.problems.append(
                f"value {address[:16]}… does not match its commitment in "
                "the record (its bytes were edited)"
            )
            bad += 1
    v.facts.append(
        f"{len(values) - bad} of {len(values)} exact checkpoint values match their commitments"
    )


def verify_consistency_file(
    doc: Mapping[str, Any], keys: Sequence[VerifierKey], origin: str | None = None
) -> Verdict:
    """Verify that the later signed head of ``doc`` extends its earlier one."""
    v = Verdict("consistency of two signed heads")
    if doc.get("format") != CONSISTENCY_FORMAT:
        v.problems.append(f"not a consistency proof of format {CONSISTENCY_FORMAT}")
        return v
    old = _head(doc.get("old"), keys, v, "earlier head")
    new = _head(doc.get("new"), keys, v, "later head")
    if old is None or new is None:
        return v
    if old.origin != new.origin or (origin is not None and new.origin != origin):
        v.problems.append(f"the heads are of different logs ({old.origin!r}, {new.origin!r})")
        return v
    try:
        proof = _hex_list(doc.get("proof"), "the consistency proof")
    except ValueError as exc:
        v.problems.append(str(exc))
        return v
    if verify_consistency(old.size, new.size, old.root, new.root, proof):
        v.facts.append(f"the log of {new.size} leaves extends the log of {old.size}")
    else:
        v.problems.append(
            f"the log of {new.size} leaves does not extend the earlier log of {old.size}: "
            "the log was rewritten between the two heads"
        )
    return v


def main(argv: Sequence[str] | None = None) -> int:
    """``python verify.py FILE --key KEY [--key KEY ...] [--origin ORIGIN]``."""
    ap = argparse.ArgumentParser(
        description="Verify a langgraph-external bundle or consistency proof, offline."
    )
    ap.add_argument("file", help="a bundle or a consistency proof (JSON)")
    ap.add_argument(
        "--key",
        action="append",
        required=True,
        help="a trusted verifier key (repeat for rotated keys)",
    )
    ap.add_argument("--origin", help="the log the heads must be of")
    a = ap.parse_args(argv)
    try:
        with open(a.file, encoding="utf-8") as f:
            doc = json.load(f)
        keys = [parse_key(k) for k in a.key]
    except (OSError, ValueError) as exc:
        print(f"cannot verify: {exc}", file=sys.stderr)
        return 2
    if not isinstance(doc, dict):
        print("cannot verify: the file is not a JSON object", file=sys.stderr)
        return 2
    check = verify_consistency_file if doc.get("format") == CONSISTENCY_FORMAT else verify_bundle
    verdict = check(doc, keys, a.origin)
    print(verdict.report())
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
