"""One app of the soak run (``benchmarks/soak.py``): a mixed workload recorded by
``External()`` until SIGTERM (or a SIGKILL of the controller's).

Every iteration runs, each on its own thread id unless said otherwise:

* a ReAct agent with two tools (``tests/graphs.py``);
* a ``Send`` fan-out into a subgraph;
* a fan-out whose subgraph interrupts: the interrupted thread is put in a shared folder,
  and whichever app claims it first (often another process) resumes it;
* one turn of the slot's long chat thread (``chat-<slot>``, kept by every process that
  plays the slot; the node trims the history to its last 24 messages, as apps do);
* a Mem0 turn: ``add`` (``infer=False``, sometimes ``infer=True``) and ``search`` through
  the Mem0 adapter, inside a graph node;
* a guarded ReAct agent whose model calls a forbidden tool (``tests/guard_agents.py``):
  routed to a fallback, or refused with ``TransitionViolation``.

With ``sealing="process"`` (the default) the app exports to Langfuse (a local receiver);
with ``sealing="worker"`` it only captures and ``lgx worker`` seals, mirrors and exports.

It writes JSON lines to ``<out>/app-<slot>-<pid>.jsonl``: ``ready``; a ``sample`` every
second (``health()``, its RSS and its sealing helper's); each Mem0 ``add`` and ``search``
it saw return; interrupts and resumes; guard outcomes; every exception of the workload
(``error``, with the exception's class chain) and the library's warnings (``log``).

    python benchmarks/soak_app.py '<json config>'
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

os.environ["MEM0_TELEMETRY"] = "False"  # before anything imports mem0
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    FakeMessagesListChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.types import Command  # noqa: E402

CHAT_KEEP = 24  # messages the long chat thread keeps


class Out:
    """The app's JSON-lines report (one line per write, flushed: a SIGKILL tears at most
    the last line, which the controller skips)."""

    def __init__(self, path: Path) -> None:
        self._f = path.open("a", buffering=1, encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"t": kind, "ts": time.time(), **fields}, default=str)
        with self._lock:
            self._f.write(line + "\n")


class LogLines(logging.Handler):
    """The library's warnings and errors as ``log`` lines (consecutive repeats counted)."""

    def __init__(self, out: Out) -> None:
        super().__init__(logging.WARNING)
        self.out = out
        self._last: str | None = None
        self._repeats = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("langgraph_external.guards"):
            return  # the violations this app provokes on purpose
        try:
            msg = record.getMessage()[:400]
        except Exception:
            msg = str(record.msg)[:400]
        if msg == self._last:
            self._repeats += 1
            return
        if self._repeats:
            self.out.write("log", level="REPEATS", msg=f"previous line {self._repeats} more times")
        self._last, self._repeats = msg, 0
        self.out.write("log", level=record.levelname, logger=record.name, msg=msg)


def exception_chain(exc: BaseException) -> list[dict[str, Any]]:
    """Each exception of the cause/context chain: its class, base classes, message."""
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen and len(out) < 8:
        seen.add(id(cur))
        out.append(
            {
                "type": f"{type(cur).__module__}.{type(cur).__qualname__}",
                "mro": [c.__name__ for c in type(cur).__mro__],
                "msg": str(cur)[:300],
            }
        )
        cur = cur.__cause__ or cur.__context__
    return out


def chat_graph(checkpointer: Any) -> Any:
    """One node answering each turn; it trims the thread's history to ``CHAT_KEEP``."""
    model = FakeMessagesListChatModel(
        responses=[AIMessage("Noted."), AIMessage("Go on."), AIMessage("I see, and then?")]
    )

    def chat(state: MessagesState) -> dict[str, Any]:
        reply = model.invoke(state["messages"][-4:])
        old = state["messages"][:-CHAT_KEEP]
        return {"messages": [RemoveMessage(id=m.id or "") for m in old] + [reply]}

    g = StateGraph(MessagesState)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    g.add_edge("chat", END)
    return g.compile(checkpointer=checkpointer)


def memory_graph(checkpointer: Any, memory: Any, llm: Any, out: Out, slot: int) -> Any:
    """A node that remembers a fact and searches the user's memories (Mem0 adapter)."""
    from langgraph_external.memory_adapters.testing import extraction_answer

    def remember(state: MessagesState) -> dict[str, Any]:
        text = str(state["messages"][-1].content)
        user = f"user-{slot}"
        infer = random.random() < 0.25
        if infer:  # one LLM call extracts two facts
            llm.responses.append(extraction_answer(f"likes {text}", f"asked about {text}"))
            added = memory.add([{"role": "user", "content": text}], user_id=user, infer=True)
        else:
            added = memory.add(f"likes {text}", user_id=user, infer=False)
        ids = [r["id"] for r in added.get("results", []) if r.get("event") == "ADD"]
        out.write("mem0_add", ids=ids, infer=infer)
        query = f"what does the user like {text}"
        found = memory.search(query, filters={"user_id": user}, top_k=5)
        out.write("mem0_search", query=query, hits=len(found.get("results", [])))
        return {"messages": [AIMessage(f"{len(ids)} memories added")]}

    g = StateGraph(MessagesState)
    g.add_node("remember", remember)
    g.add_edge(START, "remember")
    g.add_edge("remember", END)
    return g.compile(checkpointer=checkpointer)


class Sampler(threading.Thread):
    """Once a second: ``health()``, RSS of the app and of its sealing helper."""

    def __init__(self, ext: Any, out: Out, slot: int) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.ext, self.out, self.slot = ext, out, slot
        self.stop = threading.Event()
        self.me = psutil.Process()

    def run(self) -> None:
        helper_proc: psutil.Process | None = None
        ticks = 0
        while not self.stop.wait(1.0):
            ticks += 1
            if ticks % 60 == 1:
                sealing_pools = None
                with contextlib.suppress(Exception):
                    sealing_pools = (self.ext.health().get("sealing") or {}).get("connections")
                self.out.write("pools", pools=pool_stats(), helper_pools=sealing_pools)
            asked = time.monotonic()
            try:
                h = self.ext.health()
            except Exception as exc:  # health() itself must not fail: report it
                self.out.write("error", task="health", chain=exception_chain(exc))
                continue
            took = time.monotonic() - asked
            sealing = h.get("sealing") or {}
            hpid = getattr(self.ext.pipeline.sealing, "pid", None) if self.ext.pipeline else None
            helper_rss = None
            if hpid:
                try:
                    if helper_proc is None or helper_proc.pid != hpid:
                        helper_proc = psutil.Process(hpid)
                    helper_rss = helper_proc.memory_info().rss
                except psutil.Error:
                    helper_proc = None
            exports = h.get("exports") or {}
            self.out.write(
                "sample",
                failing=h.get("failing"),
                buffered=h.get("buffered"),
                oldest_buffered_seconds=h.get("oldest_buffered_seconds"),
                ledger_wait_seconds=h.get("ledger_wait_seconds"),
                ledger_down_seconds=h.get("ledger_down_seconds"),
                quarantined=len(h.get("quarantined") or {}),
                failures=len(h.get("failures") or []),
                unsealed_captures=sealing.get("unsealed_captures"),
                sealer_lag_seconds=sealing.get("sealer_lag_seconds"),
                helper_down=bool(sealing.get("helper_down")),
                helper_restarts=sealing.get("restarts"),
                export_errors={k: v.get("last_error") for k, v in exports.items()},
                spans_sent=sum(int(v.get("spans_sent") or 0) for v in exports.values()),
                export_threads_behind=sum(
                    int(v.get("threads_behind") or 0) for v in exports.values()
                ),
                health_seconds=round(took, 3),
                rss=self.me.memory_info().rss,
                helper_pid=hpid,
                helper_rss=helper_rss,
                fds=self.me.num_fds(),
                threads=threading.active_count(),
            )


def pool_stats() -> list[dict[str, Any]]:
    """Every psycopg pool of this process with its size and counters (where connections
    go over time: a pool that fills up to its maximum after an outage, or one that leaks)."""
    import gc

    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    out = []
    for obj in gc.get_objects():
        if isinstance(obj, (ConnectionPool, AsyncConnectionPool)) and not obj.closed:
            st = obj.get_stats()
            out.append(
                {
                    "name": obj.name,
                    "max": obj.max_size,
                    "size": st.get("pool_size"),
                    "available": st.get("pool_available"),
                    "opened": st.get("connections_num"),
                    "lost": st.get("connections_lost"),
                    "errors": st.get("connections_errors"),
                    "returns_bad": st.get("returns_bad"),
                }
            )
    return out


def main(cfg: dict[str, Any]) -> int:
    slot: int = cfg["slot"]
    pid = os.getpid()
    out = Out(Path(cfg["out"]) / f"app-{slot}-{pid}.jsonl")
    logging.getLogger("langgraph_external").addHandler(LogLines(out))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    rng = random.Random(cfg["seed"])
    random.seed(cfg["seed"])
    pending, claimed = Path(cfg["pending"]), Path(cfg["claimed"])

    from langgraph_external import External
    from langgraph_external.exporters import LangfuseExport
    from langgraph_external.guards import TransitionPolicy, TransitionViolation, guard
    from langgraph_external.memory_adapters import Mem0Adapter
    from langgraph_external.memory_adapters.testing import HashingEmbeddings, ScriptedChatModel
    from tests import guard_agents
    from tests.graphs import fanout_with_interrupt, fanout_with_subgraph, react_agent

    worker = cfg["sealing"] == "worker"
    kwargs: dict[str, Any] = {"spool_dir": cfg["spool"]}
    if worker:
        kwargs.update(workspace=None, sealing="worker")
    else:
        kwargs.update(
            workspace=cfg["workspace"],
            langfuse=LangfuseExport(
                public_key=cfg["lf_public"], secret_key=cfg["lf_secret"], base_url=cfg["lf_url"]
            ),
        )
    try:
        ext = External(dsn=cfg["dsn"], **kwargs).setup()
        llm = ScriptedChatModel()
        memory = Mem0Adapter.from_external(ext, llm=llm, embedder=HashingEmbeddings(dims=64))
    except Exception as exc:  # the database may be down while the app starts
        out.write("error", task="startup", chain=exception_chain(exc))
        return 3
    sampler = Sampler(ext, out, slot)
    sampler.start()
    helper = getattr(ext.pipeline.sealing, "pid", None) if ext.pipeline else None
    out.write("ready", slot=slot, pid=pid, helper_pid=helper)

    cp = ext.checkpointer
    react, fan, ask = react_agent(cp), fanout_with_subgraph(cp), fanout_with_interrupt(cp)
    chat, remember = chat_graph(cp), memory_graph(cp, memory, llm, out, slot)
    ran: list[str] = []
    guarded = {
        action: guard(
            guard_agents.react_agent(ran),
            TransitionPolicy.from_dict(
                {**guard_agents.POLICY, "on_violation": {"action": action, "fallback": "escalate"}}
            ),
            pipeline=ext.pipeline,
        ).compile(checkpointer=cp)
        for action in ("route", "raise")
    }

    def durability() -> str:
        return rng.choice(["sync", "async"])

    def task_react(i: int) -> None:
        ask_msg = {"messages": [HumanMessage(f"weather and time in Oslo? ({slot}/{pid}/{i})")]}
        react.invoke(ask_msg, ext.config(f"react-{slot}-{pid}-{i}"), durability=durability())

    def task_fan(i: int) -> None:
        fan.invoke({"items": [], "total": 0}, ext.config(f"fan-{slot}-{pid}-{i}"))

    def task_interrupt(i: int) -> None:
        tid = f"ask-{slot}-{pid}-{i}"
        got = ask.invoke({"items": [], "total": 0}, ext.config(tid), durability=durability())
        if "__interrupt__" in got:
            (pending / tid).write_text(f"{slot}:{pid}")
            out.write("interrupted", thread=tid)

    def task_resume(i: int) -> None:
        # mostly a thread another process started: resumes cross processes
        mine = f"-{slot}-{pid}-"
        waiting = sorted(pending.iterdir(), key=lambda p: (mine in p.name, p.name))
        if rng.random() < 0.3:
            waiting.reverse()
        for p in waiting[:5]:
            try:
                os.rename(p, claimed / p.name)  # claimed by this process alone
            except OSError:
                continue
            tid = p.name
            ask.invoke(Command(resume="yes"), ext.config(tid), durability=durability())
            out.write("resumed", thread=tid, started_by=(claimed / tid).read_text(), by=pid)
            return

    def task_chat(i: int) -> None:
        msg = {"messages": [HumanMessage(f"turn {i} of process {pid}")]}
        chat.invoke(msg, ext.config(f"chat-{slot}"), durability=durability())

    def task_memory(i: int) -> None:
        msg = {"messages": [HumanMessage(f"tea-{slot}-{pid}-{i}")]}
        remember.invoke(msg, ext.config(f"mem-{slot}-{pid}-{i}"))

    def task_guard(i: int) -> None:
        action = rng.choice(["route", "raise"])
        tid = f"guard-{action}-{slot}-{pid}-{i}"
        ran.clear()
        try:
            guarded[action].invoke(guard_agents.QUESTION, ext.config(tid))
            out.write("guard", action=action, outcome="routed", thread=tid)
        except TransitionViolation:
            out.write("guard", action=action, outcome="raised", thread=tid)

    tasks = [
        ("react", task_react),
        ("fan", task_fan),
        ("interrupt", task_interrupt),
        ("resume", task_resume),
        ("chat", task_chat),
        ("memory", task_memory),
        ("guard", task_guard),
    ]
    i = 0
    pace = float(cfg.get("pace", 0.0))
    while not stop.is_set():
        i += 1
        for name, fn in tasks:
            if stop.is_set():
                break
            try:
                fn(i)
                out.write("done", task=name)
            except Exception as exc:
                out.write(
                    "error",
                    task=name,
                    chain=exception_chain(exc),
                    tb=traceback.format_exc(limit=6)[-1500:],
                )
                stop.wait(0.5)
            if pace:
                stop.wait(pace)
    out.write("stopping")
    sampler.stop.set()
    sampler.join(10)
    flushed = False
    try:
        memory.close()
        flushed = ext.flush(60)
        if not flushed:  # what it still waits for (read for the report only)
            out.write("flush_state", **flush_state(ext))
        ext.close()
    except Exception as exc:
        out.write("error", task="close", chain=exception_chain(exc))
    out.write("closed", flushed=flushed)
    return 0


def flush_state(ext: Any) -> dict[str, Any]:
    """Why ``flush()`` returned False: the capturing side's counters and ``health()``."""
    p = ext.pipeline
    state: dict[str, Any] = {"health": ext.health()}
    for name in ("_count", "_storing", "_inflight", "_unflushed", "_doubtful", "_buf"):
        value = getattr(p, name, None)
        if isinstance(value, dict):
            value = {k: (len(v) if hasattr(v, "__len__") else v) for k, v in value.items() if v}
        elif isinstance(value, set):
            value = sorted(value)[:50]
        state[name] = value
    return state


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
