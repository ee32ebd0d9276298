"""The auditor's proof: an append-only Merkle log of head moves, signed tree heads, and the
bundles and proofs an auditor verifies with the deployment's public key alone.

* :mod:`~langgraph_external.proof.verify` — the verifier (standard library and
  ``cryptography`` only: copy it to the auditor's machine);
* :mod:`~langgraph_external.proof.tree` — RFC 9162 roots and proofs;
* :mod:`~langgraph_external.proof.keys` — the sealing side's Ed25519 signing key;
* :mod:`~langgraph_external.proof.heads` — signing and storing tree heads;
* :mod:`~langgraph_external.proof.audit` — bundles, consistency proofs, the ledger
  checked against its signed log.

The log itself grows in the ledger (migration v14: ``advance_thread`` appends a leaf
whenever a head moves). See docs/security.md, "The auditor's proof".
"""
