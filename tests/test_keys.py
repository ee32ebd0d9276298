"""Keyed hashes of the record: one tag domain per kind, all of them in ``record/keys.py``."""

from __future__ import annotations

import hashlib
import warnings

import pytest
from langchain_core.messages import HumanMessage

from langgraph_external.ledger import postgres as ledger_postgres
from langgraph_external.memory_adapters.mem0.store import text_hash
from langgraph_external.record import keys
from langgraph_external.record.crypto import WorkspaceCipher
from langgraph_external.record.events import canonical_json
from langgraph_external.record.render import message_to_dict
from langgraph_external.sources.callbacks import prompt_context_hash
from langgraph_external.workspace import projection

KEY = WorkspaceCipher(bytes(range(32)))


def test_every_tag_domain_is_distinct_so_no_tag_passes_for_another_kind() -> None:
    assert len(set(keys.TAG_DOMAINS)) == len(keys.TAG_DOMAINS)
    tags = {KEY.tag(domain, "same text") for domain in keys.TAG_DOMAINS}
    assert len(tags) == len(keys.TAG_DOMAINS)
    assert keys.prompt_hash("same text", KEY) != keys.memory_hash("same text", KEY)


def test_the_reserved_nonce_domain_is_the_one_sealing_derives_its_nonce_under() -> None:
    address = KEY.address(b"state")
    nonce = bytes.fromhex(KEY.tag(keys.NONCE, address))[:12]
    assert KEY.seal(b"state", address.encode())[:12] == nonce


def test_the_head_tag_is_the_known_answer_of_the_first_release() -> None:
    assert keys.head_tag(KEY, "t", 1, "h") == (
        "9acd363e4301b6bdec004c3e49cc78a3fbe768b121cc90fd1fef68cd404f2163"
    )
    assert keys.head_tag(None, "t", 1, "h") is None


def test_the_tags_other_modules_keep_are_the_ones_made_here() -> None:
    """The ledger, the workspace, the callback handler and the Mem0 adapter record tags
    under these domains; a record they wrote verifies with these functions."""
    assert keys.head_tag(KEY, "t", 7, "ab") == ledger_postgres.head_tag(KEY, "t", 7, "ab")
    doc = {"thread_id": "t", "checkpoint_id": "c", "step": 3, "values": {"x": 1}, "tag": "?"}
    assert keys.state_tag(KEY, doc) == projection.state_tag(KEY, doc)
    message = HumanMessage("hi", id="1")
    seen = {k: v for k, v in message_to_dict(message).items() if k != "id"}
    text = canonical_json({"messages": [seen], "tools": None, "params": {}})
    assert prompt_context_hash([message], key=KEY) == keys.prompt_hash(text, KEY)
    assert prompt_context_hash([message]) == keys.prompt_hash(text)
    assert keys.prompt_hash(text) == hashlib.sha256(text.encode()).hexdigest()
    assert text_hash("likes tea", KEY) == keys.memory_hash("likes tea", KEY)
    assert text_hash("likes tea") == keys.memory_hash("likes tea")


def test_a_heads_snapshot_tag_covers_every_head() -> None:
    body = {"v": 1, "heads": {"t": [3, "ab"]}}
    tag = keys.heads_tag(KEY, body)
    assert tag == KEY.tag("heads", canonical_json(body))
    assert keys.same_tag(tag, keys.heads_tag(KEY, dict(body)))
    assert not keys.same_tag(tag, keys.heads_tag(KEY, {**body, "heads": {"t": [2, "ab"]}}))
    assert not keys.same_tag(None, tag)


def test_the_key_variable_wins_over_its_earlier_name_which_still_works_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    new, old = WorkspaceCipher.generate_key(), WorkspaceCipher.generate_key()
    monkeypatch.setenv("LGX_WORKSPACE_KEY", old)
    with pytest.warns(DeprecationWarning, match=r"\$LGX_WORKSPACE_KEY.*\$LGX_KEY"):
        assert keys.key_from_env() == old
    with pytest.warns(DeprecationWarning):
        assert keys.load_key().key_id == WorkspaceCipher(old).key_id
    monkeypatch.setenv("LGX_KEY", new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert keys.key_from_env() == new
    monkeypatch.delenv("LGX_KEY")
    monkeypatch.delenv("LGX_WORKSPACE_KEY")
    assert keys.key_from_env() is None
