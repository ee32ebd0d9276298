"""The run tree of the thread view: each graph run, the nodes it ran, and inside each
node its model calls, tool calls, retriever and memory reads, routes, policy violations
and task writes; interrupts, resumes and checkpoints under their run.

Spans pair start and end events by run id. Every row has a label a person reads ("LLM
gpt-4o-mini · 43 → 30 tokens", "policy violation: tool_tier — ...") and its place on the
time and sequence axes. A task's ``writes`` and a checkpoint sit with the step that made
them, whenever they were recorded. While it builds the tree, :class:`RunTree` also
collects the thread's conversation (:class:`~langgraph_external.read.conversation.
Conversation`), model calls (:class:`~langgraph_external.read.llm_calls.LlmCalls`),
checkpoints, violations, interrupts, memory hits, users and tags;
:func:`~langgraph_external.read.thread_view.build_thread_view` puts them together.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_external.read.conversation import Conversation
from langgraph_external.read.envelopes import ts_ms
from langgraph_external.read.llm_calls import LlmCalls
from langgraph_external.read.prices import PriceTable
from langgraph_external.read.states import is_internal_channel
from langgraph_external.read.view_labels import (
    call_args,
    describe_mark,
    memory_text,
    messages_of,
    row_short,
)
from langgraph_external.record.events import EventKind
from langgraph_external.record.namespaces import split_task

__all__ = ["RunTree", "memory_hits", "place_writes", "record_failure"]

_SPAN_START = {f"{family}_start": family for family in ("run", "node", "llm", "tool")}
_SPAN_END = {"run_end", "node_end", "llm_end", "tool_end", "tool_error"}
_MARK_KIND = {
    **{k.value: "memory" for k in EventKind if k.value.startswith("memory_")},
    "retrieval": "retriever",
    "policy_violation": "violation",
    **{k: k for k in ("interrupt", "resume", "checkpoint", "writes", "route", "error")},
    "record_failed": "unrecorded",
}


class RunTree:
    """The rows of one thread's run tree, built event by event (:meth:`add`), then laid
    out (:meth:`layout`).

    Args:
        envs: the thread's envelopes, in ``seq`` order (their earliest time is time 0).
        prices: the price table for the model calls' costs.
    """

    def __init__(self, envs: Sequence[Mapping[str, Any]], prices: PriceTable):
        self.base = min((ts_ms(e["ts"]) for e in envs), default=0.0)
        self.rows: list[dict[str, Any]] = []
        self.top: list[dict[str, Any]] = []
        self.by_run: dict[str, dict[str, Any]] = {}
        self.by_task: dict[tuple[str, str], dict[str, Any]] = {}
        self.current_run: dict[str, Any] | None = None
        self.runs = 0
        self.conversation = Conversation()
        self.llm = LlmCalls(prices)
        self.checkpoints: list[dict[str, Any]] = []
        self.violations: list[dict[str, Any]] = []
        self.interrupts: list[dict[str, Any]] = []
        self.memory_hits: list[dict[str, Any]] = []
        self.stored: dict[tuple[str, str], Any] = {}  # (namespace, key) -> value put
        self.users: list[str] = []
        self.tags: list[str] = []
        self.orphans: dict[str, list[dict[str, Any]]] = {}
        self.node_runs: dict[tuple[str, Any, Any], list[dict[str, Any]]] = {}
        self.task_runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.writes: list[dict[str, Any]] = []
        self.errors_said: set[int] = set()  # runs whose error the conversation says
        self.paused: list[dict[str, Any]] = []

    def row(
        self,
        kind: str,
        env: Mapping[str, Any],
        index: int,
        parent: dict[str, Any] | None,
        label: str,
    ) -> dict[str, Any]:
        t = ts_ms(env["ts"]) - self.base
        seq = int(env.get("seq") or 0)
        r: dict[str, Any] = {
            "id": len(self.rows),
            "kind": kind,
            "event_kind": env.get("kind"),
            "name": str(env.get("name") or env.get("node") or env.get("kind") or ""),
            "label": label,
            "status": env.get("status") or "",
            "node": env.get("node"),
            "step": env.get("step"),
            "t0": t,
            "t1": t,
            "s0": seq,
            "s1": seq,
            "events": [index],
            "seqs": [seq],
            "children": [],
            "parent": parent["id"] if parent else None,
            "depth": (parent["depth"] + 1) if parent else 0,
            "detail": {},
        }
        self.rows.append(r)
        (parent["children"] if parent else self.top).append(r)
        return r

    def parent_of(self, env: Mapping[str, Any]) -> dict[str, Any] | None:
        """The span an event belongs to: by run, then by task, then the run of the time."""
        for key in ("run_id", "parent_run_id"):
            rid = env.get(key)
            if rid and rid in self.by_run and self.by_run[rid]["kind"] != "run":
                return self.by_run[rid]
        ns, task = env.get("checkpoint_ns") or "", env.get("task_id")
        if task and (found := self.by_task.get((ns, task))) is not None:
            return found
        if ns:  # a subgraph's event: inside the node that called the subgraph
            task_id, outer = split_task(ns)
            if (found := self.by_task.get((outer, task_id or ""))) is not None:
                return found
        for key in ("run_id", "parent_run_id", "root_run_id"):
            rid = env.get(key)
            if rid and rid in self.by_run:
                return self.by_run[rid]
        return self.current_run

    def add(self, index: int, env: Mapping[str, Any]) -> None:
        kind = str(env.get("kind"))
        payload = env.get("payload") or {}
        if not isinstance(payload, Mapping):
            payload = {}
        if kind in _SPAN_START:
            self.start(kind, index, env, payload)
        elif kind in _SPAN_END:
            self.end(kind, index, env, payload)
        else:
            self.mark(kind, index, env, payload)

    def start(
        self, kind: str, index: int, env: Mapping[str, Any], payload: Mapping[str, Any]
    ) -> None:
        family = _SPAN_START[kind]
        if family == "run":
            self.runs += 1
            resumed = payload.get("command") == "resume"
            label = f"run {self.runs}" + (" · resume" if resumed else "")
            r = self.row("run", env, index, None, label)
            user = payload.get("user_id")
            if user and str(user) not in self.users:
                self.users.append(str(user))
            self.tags = list(dict.fromkeys([*self.tags, *map(str, payload.get("tags") or ())]))
            r["detail"] = {
                "input": payload.get("input"),
                "command": payload.get("command"),
                "user_id": user,
                "tags": payload.get("tags"),
            }
            self.current_run = r
            for early in self.orphans.pop(str(env.get("run_id") or ""), []):
                _move(self, early, r, first=True)  # recorded before its run started
            for m in messages_of(payload.get("input")):
                self.conversation.say(m, env, "input")
        else:
            parent = self.by_run.get(str(env.get("parent_run_id") or "")) or self.parent_of(
                {**env, "run_id": None}
            )
            r = self.row(family, env, index, parent, "")
            if family == "node":
                r["label"] = f"{env.get('node') or env.get('name')} · step {env.get('step')}"
                r["detail"] = {
                    "triggers": payload.get("triggers"),
                    "task_id": env.get("task_id"),
                    "checkpoint_ns": env.get("checkpoint_ns") or "",
                }
                if env.get("task_id"):
                    task = (env.get("checkpoint_ns") or "", str(env["task_id"]))
                    self.by_task[task] = r
                    self.task_runs.setdefault(task, []).append(r)
                key = (env.get("checkpoint_ns") or "", env.get("step"), env.get("node"))
                self.node_runs.setdefault(key, []).append(r)
            elif family == "llm":
                r["label"] = f"LLM {payload.get('model') or env.get('name')}"
                self.llm.start(r, env, payload)
            else:
                r["label"] = f"tool {env.get('name')}({call_args(payload.get('args'))})"
                r["detail"] = {
                    "tool": env.get("name"),
                    "args": payload.get("args"),
                    "tool_call_id": payload.get("tool_call_id"),
                }
        r["status"] = "running"
        if env.get("run_id"):
            self.by_run[str(env["run_id"])] = r

    def end(
        self, kind: str, index: int, env: Mapping[str, Any], payload: Mapping[str, Any]
    ) -> None:
        r = self.by_run.get(str(env.get("run_id") or ""))
        family = kind.split("_")[0]
        if r is None or r["kind"] != family or r["status"] != "running":
            # an end without its start (recorded from the middle): a span ending here
            parent = None if family == "run" else self.parent_of({**env, "run_id": None})
            r = self.row(family, env, index, parent, f"{family} {env.get('name') or ''}".strip())
            if env.get("duration_ms"):
                r["t0"] = r["t1"] - float(env["duration_ms"])
        else:
            r["events"].append(index)
            r["seqs"].append(int(env.get("seq") or 0))
        r["t1"] = max(r["t0"], ts_ms(env["ts"]) - self.base)
        r["s1"] = int(env.get("seq") or 0)
        r["status"] = env.get("status") or ("error" if kind == "tool_error" else "ok")
        r["duration_ms"] = env.get("duration_ms")
        error = payload.get("error")
        if error:
            tb = payload.get("traceback")
            r["detail"].update(error=error, error_type=payload.get("error_type"), traceback=tb)
        if family == "run":
            r["detail"]["output"] = payload.get("output")
        elif family == "node":
            if r["status"] == "interrupted":
                self.paused.append(r)
            update = payload.get("update")
            r["detail"]["update"] = update
            for m in messages_of(update):
                self.conversation.say(m, env, str(env.get("node") or ""))
        elif family == "llm":
            self.llm.end(r, env, payload)
        elif family == "tool":
            r["detail"]["result"] = payload.get("parsed", payload.get("result"))
            r["detail"]["raw_result"] = payload.get("result")
            if env.get("artifact"):
                r["detail"]["artifact"] = env.get("artifact")
            if kind == "tool_error":
                r["label"] += " · error"
        if error and r["status"] == "error":
            self.failed(r, env, payload)

    def failed(self, r: dict[str, Any], env: Mapping[str, Any], p: Mapping[str, Any]) -> None:
        """An error between the messages of the conversation: where, its type and message
        (a run's error once: not again when one of its nodes said it)."""
        run = self.run_of(r)["id"]
        if r["kind"] == "run" and run in self.errors_said:
            return
        self.errors_said.add(run)
        where = "" if r["kind"] == "run" else f" in {r['name']}"
        if r["kind"] != "run" and r["step"] is not None:
            where += f" · step {r['step']}"
        what = f"{p.get('error_type') or 'error'}: {p.get('error')}"
        self.conversation.event("error", f"error{where}: {what}", env, r)

    def mark(
        self, kind: str, index: int, env: Mapping[str, Any], payload: Mapping[str, Any]
    ) -> None:
        family = _MARK_KIND.get(kind, "other")
        parent = self.checkpoint_parent(env) if family == "checkpoint" else self.parent_of(env)
        label, detail = describe_mark(family, env, payload)
        r = self.row(family, env, index, parent, label)
        r["detail"] = detail
        if family == "violation":
            rule = payload.get("rule") or env.get("name")
            self.violations.append(
                {"seq": env.get("seq"), "rule": rule, "label": label, "row": r["id"]}
            )
        elif family == "memory":
            memory_hits(self, r, env, payload)
        if family == "checkpoint":
            self.place_checkpoint(r, env, payload)
        elif family == "writes":  # placed with the task that wrote them by layout()
            r["detail"]["task"] = (env.get("checkpoint_ns") or "", str(env.get("task_id") or ""))
            self.writes.append(r)
        elif family == "interrupt":
            self.place_interrupt(r, env, parent)
        elif family == "resume" and env.get("run_id") and str(env["run_id"]) not in self.by_run:
            self.orphans.setdefault(str(env["run_id"]), []).append(r)
        elif family == "unrecorded":
            record_failure(self, r, env, payload)
        if family in ("violation", "interrupt", "error") or (
            family == "resume" and "value" in payload
        ):
            self.conversation.event(family, label, env, r)

    def checkpoint_parent(self, env: Mapping[str, Any]) -> dict[str, Any] | None:
        ns = env.get("checkpoint_ns") or ""
        return self.parent_of({"checkpoint_ns": ns}) if ns else self.current_run

    def place_checkpoint(
        self, r: dict[str, Any], env: Mapping[str, Any], payload: Mapping[str, Any]
    ) -> None:
        """A checkpoint sits at the end of the node runs of its step that wrote it."""
        nodes = set(payload.get("nodes") or ())
        ns = env.get("checkpoint_ns") or ""
        earlier = [  # each node's runs of the step before the checkpoint
            [x for x in self.node_runs.get((ns, env.get("step"), n), ()) if x["s0"] < r["s0"]]
            for n in sorted(nodes)
        ]
        ends = [x["t1"] for runs in earlier for x in runs]
        writers = [runs[-1] for runs in earlier if runs]
        if ends:
            r["t0"] = r["t1"] = max(ends)
        elif nodes <= {"__start__"} and r["parent"] is not None:  # the run's input
            r["t0"] = r["t1"] = self.rows[r["parent"]]["t0"]
        entry = {
            "row": r["id"],
            "seq": env.get("seq"),
            "checkpoint_id": env.get("checkpoint_id"),
            "checkpoint_ns": ns,
            "parent_checkpoint_id": payload.get("parent_checkpoint_id"),
            "step": env.get("step"),
            "source": payload.get("source") or env.get("name"),
            "nodes": sorted(nodes),
            "changed": [c for c in payload.get("changed") or () if not is_internal_channel(c)],
            "change": None,
            "writers": writers,
        }
        r["detail"]["checkpoint"] = entry
        self.checkpoints.append(entry)

    def place_interrupt(
        self, r: dict[str, Any], env: Mapping[str, Any], parent: dict[str, Any] | None
    ) -> None:
        """An interrupt recorded without its node: the node of its run that stopped."""
        paused = [x for x in self.paused if parent is not None and x["parent"] == parent["id"]]
        if not env.get("node") and paused:
            r["node"], r["step"] = paused[-1]["node"], paused[-1]["step"]
            r["t0"] = r["t1"] = max(r["t0"], paused[-1]["t1"])
        if env.get("node") or paused:
            r["detail"]["where"] = f"{r['node']} · step {r['step']}"
            r["label"] += f" in {r['detail']['where']}"
        self.interrupts.append({"row": r["id"], "seq": env.get("seq"), "label": r["label"]})

    def run_of(self, r: dict[str, Any]) -> dict[str, Any]:
        """The top row (a graph run) ``r`` is drawn in."""
        while r["parent"] is not None:
            r = self.rows[r["parent"]]
        return r

    def layout(self) -> dict[str, Any]:
        """Close what is still running, order the rows (each after its parent), place
        them on the time and sequence axes; the thread's status, its runs and duration.
        Returns ``rows``, ``kinds``, ``end_ms``, ``runs``, ``status``, ``duration_ms``."""
        end = max((r["t1"] for r in self.rows), default=0.0)
        last = max((r["s1"] for r in self.rows), default=0)
        first = min((r["s0"] for r in self.rows), default=0)
        for r in self.rows:
            if r["status"] == "running":
                r["t1"], r["s1"] = max(r["t1"], end), last
        place_writes(self)
        for cp in self.checkpoints:  # what the step's nodes wrote, once their runs ended
            cp["written"] = [
                {"node": w["node"], "row": w["id"], "update": w["detail"].get("update")}
                for w in cp.pop("writers")
                if w["detail"].get("update") is not None
            ]
        runs = [r for r in self.rows if r["kind"] == "run"]
        duration = sum(float(r.get("duration_ms") or (r["t1"] - r["t0"])) for r in runs)
        flat: list[dict[str, Any]] = []

        def walk(rows: list[dict[str, Any]]) -> None:
            for r in sorted(rows, key=lambda x: x["s0"]):
                flat.append(r)
                walk(r["children"])
                r["has_children"] = bool(r["children"])
                r["children"] = [c["id"] for c in r["children"]]

        walk(self.top)
        span_t = max(end, 1e-9)
        span_s = max(last - first, 1)
        for r in flat:
            r["short"] = row_short(r)
            r["x_time"] = (r["t0"] / span_t * 100.0, max(0.0, (r["t1"] - r["t0"]) / span_t * 100.0))
            r["x_seq"] = (
                (r["s0"] - first) / span_s * 100.0,
                max(0.0, (r["s1"] - r["s0"]) / span_s * 100.0),
            )
        # the thread's status is its last run's: interrupted, else how it ended
        status = "ok"
        if runs:
            status = runs[-1]["status"] or "ok"
            if self.interrupts and int(self.interrupts[-1]["seq"] or 0) > runs[-1]["s0"]:
                status = "interrupted"
        return {
            "rows": flat,
            "kinds": dict(Counter(r["kind"] for r in flat)),
            "end_ms": end,
            "runs": len(runs),
            "status": status,
            "duration_ms": duration,
        }


def _last(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    return rows[-1] if rows else None


def place_writes(tree: RunTree) -> None:
    """Each task's writes under the node run that wrote them, in its run.

    LangGraph commits a task's writes in the background, so the ledger may hold them
    before the node's own events, a later step's before an earlier one's, and a resume's
    before the last events of the run it resumes: the writes' time says which run they
    belong to, their task id which node run of it (a task paused by an interrupt runs
    again, with the same id, in the run that resumes it).
    """
    runs = [r for r in tree.top if r["kind"] == "run"]
    for w in tree.writes:
        t = w["t0"]
        within = [r for r in runs if r["t0"] <= t <= r["t1"]]
        run = _last(within or [r for r in runs if r["t0"] <= t] or runs)
        tasks = tree.task_runs.get(w["detail"].pop("task"), [])
        in_run = [x for x in tasks if run is not None and tree.run_of(x) is run]
        node = _last([x for x in (in_run or tasks) if x["t0"] <= t] or in_run)
        if node is not None:
            _move(tree, w, node)
            w["t0"] = w["t1"] = node["t1"]
            w["step"] = node["step"]
        elif run is not None and w["parent"] != run["id"]:
            _move(tree, w, run)


def _move(tree: RunTree, r: dict[str, Any], parent: dict[str, Any], first: bool = False) -> None:
    """Put row ``r`` (a row without children) under ``parent``, last (``first``: first)."""
    old = tree.rows[r["parent"]]["children"] if r["parent"] is not None else tree.top
    old.remove(r)
    parent["children"].insert(0 if first else len(parent["children"]), r)
    r["parent"], r["depth"] = parent["id"], parent["depth"] + 1


def memory_hits(
    tree: RunTree, r: dict[str, Any], env: Mapping[str, Any], p: Mapping[str, Any]
) -> None:
    """A memory operation: a search's hits, each with its text (a store hit recorded
    without its value: the value the thread put under its key, if any)."""
    if env.get("kind") == "memory_put" and "key" in p:
        tree.stored[(str(p.get("namespace")), str(p.get("key")))] = p.get("value")
    if not isinstance(p.get("hits"), list):
        return
    hits = []
    for h in p["hits"]:
        if not isinstance(h, Mapping):
            continue
        value = h.get("value", tree.stored.get((str(h.get("namespace")), str(h.get("key")))))
        hits.append({**h, "text": memory_text(value)})
        tree.memory_hits.append({**hits[-1], "seq": env.get("seq"), "node": env.get("node")})
    r["detail"]["hits"] = hits


def record_failure(
    tree: RunTree, r: dict[str, Any], env: Mapping[str, Any], p: Mapping[str, Any]
) -> None:
    """A ``record_failed`` event (row ``r``): the span whose end it replaces ends here, with
    an error, and the conversation says that something of this step is not recorded."""
    kind = str(p.get("kind") or env.get("name") or "")
    span = tree.by_run.get(str(env.get("run_id") or ""))
    if (
        kind in _SPAN_END
        and span is not None
        and span["kind"] == kind.split("_")[0]
        and span["status"] == "running"
    ):
        span["t1"], span["s1"] = max(span["t0"], r["t0"]), r["s0"]
        span["status"] = "error"
        span["label"] += " · end not recorded"
    where = f" in {env.get('node')}" if env.get("node") else ""
    if where and env.get("step") is not None:
        where += f" · step {env.get('step')}"
    why = f"{p.get('processor') or '?'}: {p.get('error_type') or 'error'}"
    said = (
        f"not recorded{where}: its {kind or 'event'} event ({why}) — something of this "
        "step could not be recorded; `lgx verify` fails the thread"
    )
    tree.conversation.event("unrecorded", said, env, r)
