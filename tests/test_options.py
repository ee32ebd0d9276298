"""``Options``: the settings beyond the day-one parameters mean the same in every sealing
mode, and the keywords of 0.1 keep working with a warning."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from langgraph_external import External, Options
from langgraph_external.errors import ConfigurationError
from langgraph_external.exporters import LangfuseExport
from langgraph_external.record.crypto import WorkspaceCipher
from tests.graphs import mark_recorded, react_agent

ASK = {"messages": [HumanMessage("weather and time in Oslo? " + "please " * 60)]}


@pytest.mark.parametrize("sealing", ["process", "thread"])
def test_own_processors_and_offload_threshold_reach_every_event_in_each_sealing_mode(
    sealing: str, dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    """The app's processors run on the events its sealer builds (checkpoints, writes) as
    on those it reports, and its threshold offloads alike — in a helper process as in a
    thread (the helper built its processors without the app's own ones)."""
    ws = tmp_path / "ws"
    opts = Options(spool_dir=spool_dir, offload_threshold=200, processors=(mark_recorded,))
    with External(dsn=dsn, workspace=ws, sealing=sealing, options=opts) as ext:
        assert ext.sealing == sealing  # the processor pickles: no fallback to a thread
        react_agent(ext.checkpointer).invoke(ASK, ext.config("t"))
        assert ext.flush(timeout=60)
        events = ext.events("t")
    kinds = {e["kind"] for e in events}
    assert {"checkpoint", "writes", "tool_end", "llm_end"} <= kinds
    # (a value of an offloaded payload is a reference: the key is what is checked)
    unmarked = [e["kind"] for e in events if "marked" not in (e.get("payload") or {})]
    assert unmarked == []
    cps = [e for e in events if e["kind"] == "checkpoint"]
    assert cps and all(e["payload"]["marked"] is True for e in cps)  # built by the sealer
    # the question (over 200 bytes) went to an artifact, its reference in the record
    llm_starts = [e for e in events if e["kind"] == "llm_start"]
    assert llm_starts and "$artifact" in repr(llm_starts[0]["payload"]["messages"])
    assert any((ws / "threads" / "t" / "artifacts").iterdir())


def test_a_worker_mode_app_refuses_settings_only_its_workers_can_apply(
    dsn: str, spool_dir: Path
) -> None:
    """With ``sealing="worker"`` an ``lgx worker`` builds the checkpoint events: the app's
    processors and threshold would silently not apply to them, so they are refused."""
    with pytest.raises(ConfigurationError, match="processors"):
        External(
            dsn=dsn, workspace=None, sealing="worker", options=Options(processors=(mark_recorded,))
        )
    with pytest.raises(ConfigurationError, match="--offload-threshold 1000"):
        External(dsn=dsn, workspace=None, sealing="worker", options=Options(offload_threshold=1000))
    with pytest.raises(ConfigurationError, match="lgx worker --langfuse"):
        External(
            dsn=dsn,
            workspace=None,
            sealing="worker",
            export=LangfuseExport(public_key="pk", secret_key="sk", base_url="http://127.0.0.1:1"),
        )


def test_keywords_of_0_1_still_work_and_warn_with_their_new_spelling(
    dsn: str, tmp_path: Path, spool_dir: Path
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ext = External(
            dsn=dsn,
            workspace=tmp_path / "ws",
            schema="lgx_old_words",
            spool_dir=spool_dir,
            record_behaviour=False,
            encryption_key=b"k" * 32,
            redactor=lambda v: (v, 0),
        )
    said = sorted(str(w.message) for w in caught if w.category is DeprecationWarning)
    assert len(said) == 5
    assert any("options=Options(audit_callbacks=...)" in m for m in said)
    assert any("pass key=..." in m for m in said)
    assert ext.schema == "lgx_old_words" and ext.options.spool_dir == spool_dir
    assert ext.options.audit_callbacks is False
    assert ext.cipher.address(b"x") == WorkspaceCipher(b"k" * 32).address(b"x")
    with pytest.raises(TypeError, match="unexpected keyword argument 'spool'"):
        External(dsn=dsn, workspace=tmp_path / "ws", spool=spool_dir)
    with pytest.raises(TypeError, match="not beside it"):
        External(dsn=dsn, workspace=tmp_path / "ws", strict=True, options=Options())


def test_bad_options_are_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="offload_threshold"):
        External(workspace=tmp_path / "ws", options=Options(offload_threshold=-1))
    with pytest.raises(ConfigurationError, match="schema"):
        External(workspace=tmp_path / "ws", options=Options(schema="no; drop"))
    assert not (tmp_path / "ws").exists()
