"""What the app calls: the checkpointer, the callback handler, the store. Sources hand events
and captures to the pipeline; they import the pipeline, the record and upstream/, never the
ledger, the workspace or an exporter (what the checkpointer needs of the ledger is the
contract in :mod:`.ports`).

* :mod:`.checkpointer` — ``ExternalCheckpointer``: delegation to the wrapped saver;
  :mod:`.checkpoint_records` — the record side (captures, events, their caches);
  :mod:`.serde_tap` — the saver's exact bytes; :mod:`.config_checks` — what is refused;
  :mod:`.capabilities` — the optional methods offered per wrapped saver.
* :mod:`.callbacks` — ``AuditCallbackHandler``, one small mapping per callback;
  :mod:`.runs` — its book of runs and the events they map to; :mod:`.callback_render` —
  the deferred rendering of their payloads.
* :mod:`.stores` — ``AuditedStore``; :mod:`.run_context` — the run-config keys and the
  graph task running the caller.
"""
