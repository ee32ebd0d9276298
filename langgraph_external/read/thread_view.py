"""A thread's record as a reviewer reads it: conversation, run tree, calls, checkpoints.

:func:`build_thread_view` turns a thread's event envelopes (``seq`` order, as the ledger or
``events.jsonl`` holds them, already redacted) into plain data that ``lgx ui`` and
``lgx timeline`` render the same way:

- **rows** of the run tree: each graph run, the nodes it ran, and inside each node its
  model calls, tool calls, retriever and memory reads, routes, policy violations and task
  writes; interrupts, resumes and checkpoints under their run. Spans pair start and end
  events by run id. Every row has a label a person reads ("LLM gpt-4o-mini · 43 → 30
  tokens", "policy violation: tool_tier — ...") and its place on the time and sequence
  axes. A task's ``writes`` and a checkpoint sit with the step that made them, whenever
  they were recorded;
- the **conversation**: every message the runs and nodes added to the thread, in order,
  with the tool calls and their results, and the violations, interrupts and resumes
  between them;
- **LLM calls**: the exact messages each call was given (a long conversation shows what
  is new since the thread's previous call, with the count of earlier messages), the
  answer, token usage and cost from a :class:`~langgraph_external.read.prices.PriceTable`;
- **checkpoints**: step, source, the nodes that wrote each one and, when the workspace's
  readable checkpoint log is given, the state change each one made.

Example:
    >>> envs = [
    ...     {"seq": 1, "ts": "2026-01-31T12:00:00+00:00", "kind": "run_start", "run_id": "r",
    ...      "parent_run_id": None, "payload": {"input": {"messages": [
    ...          {"role": "user", "content": "hi"}]}}},
    ...     {"seq": 2, "ts": "2026-01-31T12:00:00.1+00:00", "kind": "node_start",
    ...      "node": "agent", "run_id": "n", "parent_run_id": "r", "step": 1},
    ...     {"seq": 3, "ts": "2026-01-31T12:00:00.4+00:00", "kind": "node_end", "node": "agent",
    ...      "run_id": "n", "parent_run_id": "r", "step": 1, "status": "ok",
    ...      "payload": {"update": {"messages": [{"role": "assistant", "content": "hello"}]}}},
    ...     {"seq": 4, "ts": "2026-01-31T12:00:00.5+00:00", "kind": "run_end", "run_id": "r",
    ...      "parent_run_id": None, "status": "ok", "duration_ms": 500.0},
    ... ]
    >>> view = build_thread_view("t-1", envs)
    >>> [(r["depth"], r["kind"], r["label"]) for r in view["rows"]]
    [(0, 'run', 'run 1'), (1, 'node', 'agent · step 1')]
    >>> [(m["role"], m["content"]) for m in view["conversation"]]
    [('user', 'hi'), ('assistant', 'hello')]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from langgraph_external.read.diff import diff_messages
from langgraph_external.read.prices import PriceTable
from langgraph_external.record.events import canonical_json
from langgraph_external.record.namespaces import split_task

__all__ = ["build_thread_view", "checkpoint_states", "summarize"]

_SPAN_START = {
    "run_start": "run",
    "node_start": "node",
    "llm_start": "llm",
    "tool_start": "tool",
}
_SPAN_END = {"run_end", "node_end", "llm_end", "tool_end", "tool_error"}
_MEMORY = {
    "memory_search",
    "memory_get",
    "memory_put",
    "memory_add",
    "memory_update",
    "memory_delete",
    "memory_erase",
}
_MARK_KIND = {
    **dict.fromkeys(_MEMORY, "memory"),
    "retrieval": "retriever",
    "policy_violation": "violation",
    "interrupt": "interrupt",
    "resume": "resume",
    "checkpoint": "checkpoint",
    "writes": "writes",
    "route": "route",
    "error": "error",
}
KIND_NAMES = {
    "run": "graph run",
    "node": "node",
    "llm": "LLM call",
    "tool": "tool call",
    "retriever": "retriever",
    "memory": "memory",
    "violation": "policy violation",
    "interrupt": "interrupt",
    "resume": "resume",
    "checkpoint": "checkpoint",
    "writes": "task writes",
    "route": "route",
    "error": "error",
    "other": "other",
}
"""What each row kind is called in legends and headings."""

PROMPT_CONTEXT = 3
"""Messages of an earlier prompt shown before what a call added (the rest are counted)."""


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp() * 1000.0


def _brief(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _call_args(args: Any, limit: int = 60) -> str:
    """``key=value, ...`` of a tool call's arguments, cut to ``limit`` characters."""
    if isinstance(args, Mapping):
        text = ", ".join(
            f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in args.items()
        )
    else:
        text = "" if args is None else _brief(args, limit)
    return _brief(text, limit) if text else ""


def _messages_of(update: Any) -> list[dict[str, Any]]:
    """Messages a node update or run input adds (a ``Command``'s update too)."""
    if not isinstance(update, Mapping):
        return []
    inner = update.get("update") if "goto" in update or "resume" in update else None
    if isinstance(inner, Mapping):
        return _messages_of(inner)
    msgs = update.get("messages")
    if isinstance(msgs, Mapping) and "$tail" in msgs:  # a long run output, cut
        msgs = msgs["$tail"]
    if isinstance(msgs, Mapping) and "role" in msgs:
        msgs = [msgs]
    if not isinstance(msgs, list):
        return []
    return [dict(m) for m in msgs if isinstance(m, Mapping) and "role" in m]


def _usage(payload: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
    usage = payload.get("usage") or {}
    if not isinstance(usage, Mapping):
        return None, None, None

    def num(*keys: str) -> int | None:
        for k in keys:
            v = usage.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return int(v)
        return None

    i = num("input_tokens", "prompt_tokens")
    o = num("output_tokens", "completion_tokens")
    t = num("total_tokens")
    if t is None and (i is not None or o is not None):
        t = (i or 0) + (o or 0)
    return i, o, t


class _Builder:
    def __init__(self, thread_id: str, envs: Sequence[Mapping[str, Any]], prices: PriceTable):
        self.thread_id = thread_id
        self.envs = envs
        self.prices = prices
        self.base = min((_ts(e["ts"]) for e in envs), default=0.0)
        self.rows: list[dict[str, Any]] = []
        self.top: list[dict[str, Any]] = []
        self.by_run: dict[str, dict[str, Any]] = {}
        self.by_task: dict[tuple[str, str], dict[str, Any]] = {}
        self.by_checkpoint: dict[str, dict[str, Any]] = {}
        self.current_run: dict[str, Any] | None = None
        self.runs = 0
        self.conversation: list[dict[str, Any]] = []
        self.message_at: dict[str, int] = {}
        self.llm_calls: list[dict[str, Any]] = []
        self.last_prompt: list[dict[str, Any]] | None = None
        self.last_prompt_seq: int | None = None
        self.checkpoints: list[dict[str, Any]] = []
        self.violations: list[dict[str, Any]] = []
        self.interrupts: list[dict[str, Any]] = []
        self.memory_hits: list[dict[str, Any]] = []
        self.users: list[str] = []
        self.tags: list[str] = []
        self.orphans: dict[str, list[dict[str, Any]]] = {}
        self.node_runs: dict[tuple[str, Any, Any], list[dict[str, Any]]] = {}
        self.paused: list[dict[str, Any]] = []

    # -- rows -----------------------------------------------------------------------
    def row(
        self,
        kind: str,
        env: Mapping[str, Any],
        index: int,
        parent: dict[str, Any] | None,
        label: str,
    ) -> dict[str, Any]:
        t = _ts(env["ts"]) - self.base
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

    def adopt(self, r: dict[str, Any], parent: dict[str, Any]) -> None:
        """Move a row recorded before its run started into that run."""
        old = self.rows[r["parent"]]["children"] if r["parent"] is not None else self.top
        old.remove(r)
        parent["children"].insert(0, r)
        r["parent"], r["depth"] = parent["id"], parent["depth"] + 1

    def parent_of(self, env: Mapping[str, Any]) -> dict[str, Any] | None:
        """The span an event belongs to: by run, then by task, then the run of the time."""
        for key in ("run_id", "parent_run_id"):
            rid = env.get(key)
            if rid and rid in self.by_run and self.by_run[rid]["kind"] != "run":
                return self.by_run[rid]
        task = env.get("task_id")
        if task:
            found = self.by_task.get((env.get("checkpoint_ns") or "", task))
            if found is not None:
                return found
        ns = env.get("checkpoint_ns") or ""
        if ns:  # a subgraph's event: inside the node that called the subgraph
            task_id, outer = split_task(ns)
            found = self.by_task.get((outer, task_id or ""))
            if found is not None:
                return found
        for key in ("run_id", "parent_run_id", "root_run_id"):
            rid = env.get(key)
            if rid and rid in self.by_run:
                return self.by_run[rid]
        return self.current_run

    # -- events ---------------------------------------------------------------------
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
            r["status"] = "running"
            user = payload.get("user_id")
            if user and str(user) not in self.users:
                self.users.append(str(user))
            for tag in payload.get("tags") or ():
                if str(tag) not in self.tags:
                    self.tags.append(str(tag))
            r["detail"] = {
                "input": payload.get("input"),
                "command": payload.get("command"),
                "user_id": user,
                "tags": payload.get("tags"),
            }
            self.current_run = r
            for early in self.orphans.pop(str(env.get("run_id") or ""), []):
                self.adopt(early, r)
            for m in _messages_of(payload.get("input")):
                self.say(m, env, "input")
        else:
            parent = self.by_run.get(str(env.get("parent_run_id") or "")) or self.parent_of(
                {**env, "run_id": None}
            )
            if family == "node":
                label = f"{env.get('node') or env.get('name')} · step {env.get('step')}"
            elif family == "llm":
                label = f"LLM {payload.get('model') or env.get('name')}"
            else:
                label = f"tool {env.get('name')}({_call_args(payload.get('args'))})"
            r = self.row(family, env, index, parent, label)
            r["status"] = "running"
            if family == "node":
                r["detail"] = {
                    "triggers": payload.get("triggers"),
                    "task_id": env.get("task_id"),
                    "checkpoint_ns": env.get("checkpoint_ns") or "",
                }
                if env.get("task_id"):
                    self.by_task[(env.get("checkpoint_ns") or "", str(env["task_id"]))] = r
                key = (env.get("checkpoint_ns") or "", env.get("step"), env.get("node"))
                self.node_runs.setdefault(key, []).append(r)
            elif family == "llm":
                self.llm_start(r, env, payload)
            else:
                r["detail"] = {
                    "tool": env.get("name"),
                    "args": payload.get("args"),
                    "tool_call_id": payload.get("tool_call_id"),
                }
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
        r["t1"] = max(r["t0"], _ts(env["ts"]) - self.base)
        r["s1"] = int(env.get("seq") or 0)
        r["status"] = env.get("status") or ("error" if kind == "tool_error" else "ok")
        r["duration_ms"] = env.get("duration_ms")
        error = payload.get("error")
        if error:
            r["detail"]["error"] = error
            r["detail"]["error_type"] = payload.get("error_type")
        if family == "run":
            r["detail"]["output"] = payload.get("output")
        elif family == "node":
            if r["status"] == "interrupted":
                self.paused.append(r)
            update = payload.get("update")
            r["detail"]["update"] = update
            for m in _messages_of(update):
                self.say(m, env, str(env.get("node") or ""))
        elif family == "llm":
            self.llm_end(r, env, payload)
        elif family == "tool":
            r["detail"]["result"] = payload.get("parsed", payload.get("result"))
            r["detail"]["raw_result"] = payload.get("result")
            if env.get("artifact"):
                r["detail"]["artifact"] = env.get("artifact")
            if kind == "tool_error":
                r["label"] += " · error"

    def mark(
        self, kind: str, index: int, env: Mapping[str, Any], payload: Mapping[str, Any]
    ) -> None:
        family = _MARK_KIND.get(kind, "other")
        parent = self.checkpoint_parent(env) if family == "checkpoint" else self.parent_of(env)
        label, detail = self.describe(family, env, payload)
        r = self.row(family, env, index, parent, label)
        r["detail"] = detail
        if family == "checkpoint":
            self.place_checkpoint(r, env, payload)
        elif family == "writes" and parent is not None and parent["kind"] == "node":
            r["t0"] = r["t1"] = parent["t1"]  # with the task that wrote them
            r["step"] = parent["step"]
        elif family == "interrupt":
            self.place_interrupt(r, env, parent)
        elif family == "resume" and env.get("run_id") and str(env["run_id"]) not in self.by_run:
            self.orphans.setdefault(str(env["run_id"]), []).append(r)
        if family in ("violation", "interrupt") or (family == "resume" and "value" in payload):
            self.conversation.append(
                {
                    "role": "event",
                    "kind": family,
                    "label": label,
                    "seq": env.get("seq"),
                    "row": r["id"],
                    "status": r["status"],
                }
            )

    def checkpoint_parent(self, env: Mapping[str, Any]) -> dict[str, Any] | None:
        ns = env.get("checkpoint_ns") or ""
        if ns:
            return self.parent_of({"checkpoint_ns": ns})
        return self.current_run

    def place_checkpoint(
        self, r: dict[str, Any], env: Mapping[str, Any], payload: Mapping[str, Any]
    ) -> None:
        """A checkpoint sits at the end of the node runs of its step that wrote it."""
        nodes = set(payload.get("nodes") or ())
        ns = env.get("checkpoint_ns") or ""
        ends = [
            x["t1"]
            for n in nodes
            for x in self.node_runs.get((ns, env.get("step"), n), ())
            if x["s0"] < r["s0"]
        ]
        writers = [
            runs[-1]
            for n in sorted(nodes)
            if (
                runs := [
                    x for x in self.node_runs.get((ns, env.get("step"), n), ()) if x["s0"] < r["s0"]
                ]
            )
        ]
        if ends:
            r["t0"] = r["t1"] = max(ends)
        elif nodes <= {"__start__"} and r["parent"] is not None:  # the run's input
            r["t0"] = r["t1"] = self.rows[r["parent"]]["t0"]
        if env.get("checkpoint_id"):
            self.by_checkpoint[str(env["checkpoint_id"])] = r
        entry = {
            "row": r["id"],
            "seq": env.get("seq"),
            "checkpoint_id": env.get("checkpoint_id"),
            "checkpoint_ns": ns,
            "parent_checkpoint_id": payload.get("parent_checkpoint_id"),
            "step": env.get("step"),
            "source": payload.get("source") or env.get("name"),
            "nodes": sorted(nodes),
            "changed": [c for c in payload.get("changed") or () if not _internal(c)],
            "change": None,
            "writers": writers,
        }
        r["detail"]["checkpoint"] = entry
        self.checkpoints.append(entry)

    def place_interrupt(
        self, r: dict[str, Any], env: Mapping[str, Any], parent: dict[str, Any] | None
    ) -> None:
        """An interrupt recorded without its node: the node of its run that stopped."""
        if env.get("node"):
            where = f"{env.get('node')} · step {env.get('step')}"
        else:
            paused = [x for x in self.paused if parent is not None and x["parent"] == parent["id"]]
            where = f"{paused[-1]['node']} · step {paused[-1]['step']}" if paused else ""
            if paused:
                r["node"], r["step"] = paused[-1]["node"], paused[-1]["step"]
                r["t0"] = r["t1"] = max(r["t0"], paused[-1]["t1"])
        if where:
            r["label"] += f" in {where}"
            r["detail"]["where"] = where
        self.interrupts.append({"row": r["id"], "seq": env.get("seq"), "label": r["label"]})

    def describe(
        self, family: str, env: Mapping[str, Any], p: Mapping[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        if family == "violation":
            rule = p.get("rule") or env.get("name")
            label = f"policy violation: {rule} — {p.get('message') or ''}".rstrip(" —")
            outcome = p.get("outcome") or env.get("status")
            if outcome:
                label += f" ({outcome})"
            detail = {
                k: p.get(k)
                for k in (
                    "rule",
                    "message",
                    "from",
                    "to",
                    "action",
                    "outcome",
                    "fallback",
                    "would_be",
                    "policy_name",
                    "policy_rule",
                    "policy_hash",
                )
            }
            self.violations.append(
                {"seq": env.get("seq"), "rule": rule, "label": label, "row": len(self.rows)}
            )
            return label, detail
        if family == "memory":
            op = str(env.get("kind")).removeprefix("memory_")
            hits = p.get("hits") if isinstance(p.get("hits"), list) else None
            if hits is not None:
                scores = ", ".join(
                    f"{h.get('score'):.2f}" if isinstance(h.get("score"), (int, float)) else "?"
                    for h in hits[:5]
                )
                label = f"memory {op} · {len(hits)} hit{'s' if len(hits) != 1 else ''}"
                label += f" ({scores})" if hits else ""
                for h in hits:
                    self.memory_hits.append({**h, "seq": env.get("seq"), "node": env.get("node")})
            else:
                what = p.get("memory") or p.get("text") or p.get("event") or ""
                label = f"memory {op}" + (f": {_brief(what, 60)}" if what else "")
            return label, {"operation": op, "payload": p}
        if family == "retriever":
            hits = p.get("hits") or []
            label = f"retriever · {len(hits)} document{'s' if len(hits) != 1 else ''}"
            return label, {"query": p.get("query"), "hits": hits}
        if family == "interrupt":
            values = [
                i.get("value") if isinstance(i, Mapping) else i for i in p.get("interrupts") or ()
            ]
            what = ""
            if (
                values
                and isinstance(values[0], Mapping)
                and values[0].get("type") == ("policy_violation")
            ):
                what = f": awaiting approval of {values[0].get('rule')} ({values[0].get('to')})"
            elif values:
                what = f": {_brief(values[0], 60)}"
            return f"interrupt{what}", {"values": values, "status": env.get("status")}
        if family == "resume":
            if "value" in p:
                return f"resume with {_brief(p.get('value'), 60)}", {"value": p.get("value")}
            return "resumed from checkpoint", {"from_checkpoint": p.get("from_checkpoint")}
        if family == "checkpoint":
            source = p.get("source") or env.get("name")
            nodes = ", ".join(n for n in p.get("nodes") or () if n)
            label = f"checkpoint · step {env.get('step')} · {source}"
            if nodes:
                label += f" · by {nodes}"
            return label, {}
        if family == "writes":
            chans = [w.get("channel") for w in p.get("writes") or () if isinstance(w, Mapping)]
            shown = [c for c in chans if c and not str(c).startswith("branch:")]
            label = "writes " + (", ".join(str(c) for c in shown) or ", ".join(map(str, chans)))
            return label, {"channels": chans, "task_path": p.get("task_path")}
        if family == "route":
            return f"route → {_brief(p.get('destination'), 60)}", {
                "destination": p.get("destination")
            }
        if family == "error":
            return f"error: {_brief(p.get('error') or env.get('name'), 80)}", {"payload": p}
        return f"{env.get('kind')} {env.get('name') or ''}".strip(), {"payload": p}

    # -- model calls ----------------------------------------------------------------
    def llm_start(self, r: dict[str, Any], env: Mapping[str, Any], p: Mapping[str, Any]) -> None:
        msgs = p.get("messages")
        if msgs is None and p.get("prompts") is not None:
            msgs = [{"role": "user", "content": t} for t in p.get("prompts") or ()]
        msgs = [m for m in msgs or () if isinstance(m, Mapping)]
        shared = 0
        prev = self.last_prompt
        if prev:
            while shared < min(len(prev), len(msgs)) and _same_message(prev[shared], msgs[shared]):
                shared += 1
        hidden = max(0, shared - PROMPT_CONTEXT)
        call = {
            "row": r["id"],
            "seq": env.get("seq"),
            "node": env.get("node"),
            "step": env.get("step"),
            "model": p.get("model") or env.get("name"),
            "params": p.get("params"),
            "tools": p.get("tools"),
            "messages": msgs[hidden:],
            "hidden_messages": hidden,
            "hidden_from_seq": self.last_prompt_seq if hidden else None,
            "prompt_messages": len(msgs),
            "prompt_hash": p.get("prompt_context_hash"),
            "answer": [],
            "tool_calls": [],
            "input_tokens": None,
            "output_tokens": None,
            "total_tokens": None,
            "cost": None,
            "status": "running",
        }
        self.last_prompt, self.last_prompt_seq = msgs, env.get("seq")
        r["detail"]["llm"] = call
        self.llm_calls.append(call)

    def llm_end(self, r: dict[str, Any], env: Mapping[str, Any], p: Mapping[str, Any]) -> None:
        call = r["detail"].get("llm")
        if call is None:
            call = {
                "row": r["id"],
                "seq": env.get("seq"),
                "model": env.get("name"),
                "messages": [],
                "hidden_messages": 0,
                "prompt_messages": 0,
                "node": env.get("node"),
                "step": env.get("step"),
            }
            r["detail"]["llm"] = call
            self.llm_calls.append(call)
        call["answer"] = [g for g in p.get("generations") or () if isinstance(g, Mapping)]
        call["tool_calls"] = p.get("tool_calls") or []
        i, o, t = _usage(p)
        call.update(input_tokens=i, output_tokens=o, total_tokens=t, status=r["status"])
        call["cost"] = self.prices.cost(call.get("model"), input_tokens=i, output_tokens=o)
        call["priced"] = self.prices.price_of(call.get("model")) is not None
        call["duration_ms"] = env.get("duration_ms")
        if p.get("error"):
            call["error"] = p.get("error")
        if t is not None:
            r["label"] += f" · {i if i is not None else '?'} → {o if o is not None else '?'} tokens"
        if call["cost"] is not None:
            r["label"] += f" · {format_cost(call['cost'], self.prices.currency)}"
        elif t is not None:
            r["label"] += " · unknown price"

    # -- conversation ---------------------------------------------------------------
    def say(self, m: Mapping[str, Any], env: Mapping[str, Any], source: str) -> None:
        if m.get("role") == "remove":
            return
        entry = {
            "role": str(m.get("role")),
            "content": m.get("content"),
            "name": m.get("name"),
            "tool_calls": m.get("tool_calls") or [],
            "tool_call_id": m.get("tool_call_id"),
            "status": m.get("status"),
            "id": m.get("id"),
            "seq": env.get("seq"),
            "source": source,
            "step": env.get("step"),
        }
        mid = m.get("id")
        if mid and mid in self.message_at:  # the same message again (a run's input): once
            return
        if mid:
            self.message_at[str(mid)] = len(self.conversation)
        self.conversation.append(entry)

    def finish(self) -> dict[str, Any]:
        end = max((r["t1"] for r in self.rows), default=0.0)
        last = max((r["s1"] for r in self.rows), default=0)
        first = min((r["s0"] for r in self.rows), default=0)
        for r in self.rows:
            if r["status"] == "running":
                r["t1"], r["s1"] = max(r["t1"], end), last
        for cp in self.checkpoints:  # what the step's nodes wrote, once their runs ended
            cp["written"] = [
                {"node": w["node"], "row": w["id"], "update": w["detail"].get("update")}
                for w in cp.pop("writers")
                if w["detail"].get("update") is not None
            ]
        # tool results next to the calls that asked for them
        results = {m["tool_call_id"]: m for m in self.conversation if m.get("role") == "tool"}
        for m in self.conversation:
            for call in m.get("tool_calls") or ():
                res = results.get(call.get("id"))
                if res is not None:
                    call["result"] = res
                    res["answers"] = call.get("name")
        total_in = sum(c.get("input_tokens") or 0 for c in self.llm_calls)
        total_out = sum(c.get("output_tokens") or 0 for c in self.llm_calls)
        costs = [c.get("cost") for c in self.llm_calls if c.get("total_tokens") is not None]
        unknown = sorted(
            {
                str(c.get("model"))
                for c in self.llm_calls
                if c.get("total_tokens") is not None and c.get("cost") is None
            }
        )
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
        for r in flat:
            r["short"] = _short(r)
        span_t = max(end, 1e-9)
        span_s = max(last - first, 1)
        for r in flat:
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
        kinds: dict[str, int] = {}
        for r in flat:
            kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        return {
            "thread_id": self.thread_id,
            "events": len(self.envs),
            "t0": min((e["ts"] for e in self.envs), default=None),
            "end_ms": end,
            "rows": flat,
            "kinds": kinds,
            "conversation": self.conversation,
            "llm_calls": self.llm_calls,
            "checkpoints": self.checkpoints,
            "violations": self.violations,
            "interrupts": self.interrupts,
            "memory_hits": self.memory_hits,
            "users": self.users,
            "tags": self.tags,
            "runs": len(runs),
            "status": status,
            "duration_ms": duration,
            "tokens": {"input": total_in, "output": total_out, "total": total_in + total_out},
            "cost": sum(known) if (known := [c for c in costs if c is not None]) else None,
            "cost_complete": not unknown,
            "unknown_price_models": unknown,
            "currency": self.prices.currency,
            "prices_source": self.prices.source,
        }


def _short(r: Mapping[str, Any]) -> str:
    """The few words drawn next to a row's bar."""
    kind, d = r["kind"], r["detail"]
    if kind == "llm":
        call = d.get("llm") or {}
        return str(call.get("model") or r["name"])
    if kind in ("node", "tool"):
        return str(r["name"]) + (" · error" if r["status"] == "error" else "")
    if kind == "violation":
        return f"⚠ {d.get('rule') or r['name']}"
    if kind == "interrupt":
        return "interrupt"
    if kind == "resume":
        return "resume" if "value" in d else ""
    if kind == "memory":
        hits = (d.get("payload") or {}).get("hits")
        return f"{len(hits)} memory hits" if isinstance(hits, list) else str(d.get("operation"))
    if kind == "error":
        return "error"
    return ""


def _internal(channel: str) -> bool:
    return channel.startswith(("__", "branch:"))


def _same_message(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if a.get("id") and b.get("id"):
        return bool(a.get("id") == b.get("id") and a.get("content") == b.get("content"))
    return a == b


def format_cost(value: float | None, currency: str = "USD") -> str:
    """A cost as people read it (``$0.00045``, ``1.20 EUR``); ``unknown price`` for None.

    Example:
        >>> format_cost(0.000451), format_cost(12.5), format_cost(None), format_cost(2, "EUR")
        ('$0.000451', '$12.50', 'unknown price', '2.00 EUR')
    """
    if value is None:
        return "unknown price"
    text = f"{value:.2f}" if value >= 0.01 or value == 0 else f"{value:.3g}"
    if "e" in text:
        text = f"{value:.8f}".rstrip("0")
    return f"${text}" if currency == "USD" else f"{text} {currency}"


def build_thread_view(
    thread_id: str,
    envelopes: Iterable[Mapping[str, Any]],
    *,
    prices: PriceTable | None = None,
    states: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The reviewer's view of one thread (see the module docs).

    Args:
        thread_id: the thread.
        envelopes: its events in ``seq`` order.
        prices: the price table (default: every price unknown).
        states: ``(checkpoint_ns, checkpoint_id) -> {"values", "parent"}`` from
            :func:`checkpoint_states`; each checkpoint then carries the state change it
            made (``change``), else only the channels it changed.
    """
    envs = [e for e in envelopes if e.get("ts")]
    b = _Builder(thread_id, envs, prices or PriceTable())
    for i, env in enumerate(envs):
        b.add(i, env)
    view = b.finish()
    if states:
        for cp in view["checkpoints"]:
            key = (cp["checkpoint_ns"], cp["checkpoint_id"])
            st = states.get(key)
            if st is None:
                continue
            parent = states.get((cp["checkpoint_ns"], st.get("parent") or ""))
            cp["change"] = state_change(parent["values"] if parent else {}, st["values"])
    return view


def state_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """What a checkpoint changed: channels added, removed, changed; messages by id.

    Message lists are compared by message id (the way the ``add_messages`` reducer keys
    them), so a long conversation costs one pass; lists without ids fall back to
    :func:`~langgraph_external.read.diff.diff_messages`. A value the workspace's log holds only
    by reference (``$large``: too large to render there) is named in ``unrendered``.

    Example:
        >>> ch = state_change(
        ...     {"n": 1, "messages": [{"id": "a", "role": "user", "content": "hi"}]},
        ...     {"n": 2, "messages": [{"id": "a", "role": "user", "content": "hi"},
        ...                           {"id": "b", "role": "assistant", "content": "yo"}]})
        >>> [(c["channel"], len(c.get("added", ())), c.get("after")) for c in ch["channels"]]
        [('messages', 1, None), ('n', 0, 2)]
        >>> state_change({"messages": {"$large": "ab12"}}, {"messages": {"$large": "cd34"}})
        {'channels': [], 'unrendered': ['messages']}
    """
    out: list[dict[str, Any]] = []
    unrendered: list[str] = []
    for ch in sorted(set(before) | set(after)):
        a, b = before.get(ch), after.get(ch)
        if a == b:
            continue
        if _large(a) or _large(b):  # too large for the log: its blob is not opened here
            unrendered.append(ch)
            continue
        if (_message_list(a) or _message_list(b)) and all(
            v in (None, []) or _message_list(v) for v in (a, b)
        ):
            la, lb = list(a or []), list(b or [])
            if all(_is_message(m) and m.get("id") for m in la + lb):
                ids_a = {m["id"]: m for m in la}
                ids_b = {m["id"] for m in lb}
                added = [m for m in lb if m["id"] not in ids_a]
                changed = [
                    {"before": ids_a[m["id"]], "after": m}
                    for m in lb
                    if m["id"] in ids_a and ids_a[m["id"]] != m
                ]
                removed = [m for m in la if m["id"] not in ids_b]
            else:
                md = diff_messages(la, lb)
                added = [x["message"] for x in md.added]
                removed = [x["message"] for x in md.removed]
                changed = [
                    {"before": la[x["index_a"]], "after": lb[x["index_b"]]} for x in md.changed
                ]
            if added or removed or changed:
                out.append({"channel": ch, "added": added, "removed": removed, "changed": changed})
        elif canonical_json(a) != canonical_json(b):
            out.append({"channel": ch, "before": a, "after": b})
    return {"channels": out, "unrendered": unrendered}


def _is_message(m: Any) -> bool:
    return isinstance(m, Mapping) and "role" in m and "content" in m


def _message_list(v: Any) -> bool:
    """A list of readable messages (its ends checked: a channel holds one kind of value)."""
    return isinstance(v, list) and bool(v) and _is_message(v[0]) and _is_message(v[-1])


def _large(v: Any) -> bool:
    return isinstance(v, Mapping) and "$large" in v


def checkpoint_states(
    ws: Any, thread_id: str, namespaces: Iterable[str] = ("",)
) -> dict[tuple[str, str], dict[str, Any]]:
    """Readable state at every checkpoint of a thread, from the workspace's checkpoint logs.

    Each channel's value is the rendering recorded with the checkpoint that changed it
    (what ``lgx state`` shows, redacted like ``state.json``); a value too large to be
    rendered in the log shows as its ``$large`` reference. Returns ``{}`` for a namespace
    the workspace does not hold (or holds torn).

    Args:
        ws: the :class:`~langgraph_external.workspace.files.Workspace`.
        thread_id: the thread.
        namespaces: the checkpoint namespaces to read (the ledger's checkpoint events
            name them).
    """
    from langgraph_external.errors import RestoreError
    from langgraph_external.ops.restore import CheckpointLog

    out: dict[tuple[str, str], dict[str, Any]] = {}
    for ns in dict.fromkeys(namespaces):
        try:
            log = CheckpointLog(ws, thread_id, ns, cipher=None)
        except (RestoreError, OSError, ValueError):  # torn or unreadable: the ledger's view
            continue
        for cid, doc in log.docs.items():
            parent = str(doc.get("parent_checkpoint_id") or "")
            values = dict(out[(ns, parent)]["values"]) if (ns, parent) in out else {}
            for ch, value in (doc.get("updates") or {}).items():
                if not _internal(ch):
                    values[ch] = value
            for ch, ref in (doc.get("channels") or {}).items():
                if not _internal(ch) and (ref or {}).get("type") == "empty":
                    values.pop(ch, None)
            out[(ns, cid)] = {"values": values, "parent": parent or None}
    return out


def summarize(view: Mapping[str, Any]) -> dict[str, Any]:
    """The headline numbers of a thread view (for JSON output and the threads list)."""
    return {
        "thread_id": view["thread_id"],
        "events": view["events"],
        "runs": view["runs"],
        "status": view["status"],
        "duration_ms": round(float(view["duration_ms"]), 3),
        "tokens": view["tokens"],
        "cost": view["cost"],
        "unknown_price_models": view["unknown_price_models"],
        "violations": [v["rule"] for v in view["violations"]],
        "interrupts": len(view["interrupts"]),
        "checkpoints": len(view["checkpoints"]),
        "users": view["users"],
        "tags": view["tags"],
    }
