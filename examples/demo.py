"""End-to-end demo: a tool-calling agent recorded by langgraph-external.

Runs on the embedded PostgreSQL (no setup). The LLM is a scripted fake chat model so the
demo works offline; everything else (LangGraph, the Postgres saver, the ledger, the
workspace) is real.

    bash scripts/demo.sh            # or: python examples/demo.py [--workspace DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from rich.console import Console
from rich.table import Table

from langgraph_external import External, verify_chain
from langgraph_external.read.inspection import place_events


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by id."""
    return {"order_id": order_id, "status": "delivered", "amount": 42.5}


@tool
def check_return_policy(days_since_delivery: int) -> str:
    """Whether a return is still allowed."""
    return "eligible" if days_since_delivery <= 30 else "expired"


def build_agent() -> StateGraph:
    """The app a team already has: nothing in it knows about langgraph-external."""
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[{"id": "call-1", "name": "lookup_order", "args": {"order_id": "A-17"}}],
            ),
            AIMessage(
                "",
                tool_calls=[
                    {
                        "id": "call-2",
                        "name": "check_return_policy",
                        "args": {"days_since_delivery": 12},
                    }
                ],
            ),
            AIMessage("Order A-17 was delivered 12 days ago and is eligible for a refund."),
        ]
    )

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup_order, check_return_policy]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workspace", default="./agent_workspace")
    args = parser.parse_args()
    console = Console()
    thread_id = f"demo-{uuid.uuid4().hex[:8]}"
    builder = build_agent()

    # --- the integration: three lines -------------------------------------------------
    with External(dsn=os.environ.get("LGX_DSN"), workspace=args.workspace) as ext:
        graph = builder.compile(checkpointer=ext.checkpointer)
        result = graph.invoke(
            {"messages": [HumanMessage("Can I return order A-17?")]}, ext.config(thread_id)
        )
        # ---------------------------------------------------------------------------------
        console.print(f"[bold]Agent:[/] {result['messages'][-1].content}")
        events = ext.events(thread_id)
        verify_chain(events)
        dsn = ext.dsn
        assert dsn is not None

        table = Table(
            title=f"ledger events of {thread_id}, step by step (hash chain verified)",
            caption="seq: the commit order (the hash chain's); ts: when it happened (UTC)",
        )
        for col in ("seq", "ts", "kind", "node", "step", "checkpoint_id"):
            table.add_column(col)
        for p in place_events(events):
            e = p.event
            table.add_row(
                str(e["seq"]),
                str(e["ts"])[11:23],
                e["kind"],
                e["node"] or "",
                "" if p.own_step is None else str(p.own_step),
                (e["checkpoint_id"] or "")[:13],
            )
        console.print(table)

        query = (
            "select step, nodes, task_ids, workspace_path\n"
            "from langgraph_external.checkpoints\n"
            "where thread_id = %s and checkpoint_ns = '' order by step"
        )
        console.print("[bold]Example SQL[/] (which node wrote each checkpoint):")
        console.print(query.replace("%s", f"'{thread_id}'"))
        with psycopg.connect(dsn) as conn:
            for row in conn.execute(query, (thread_id,)).fetchall():
                line = f"  step={row[0]!s:>3}  nodes={row[1]!s:<14} {row[3]}"
                console.print(line, soft_wrap=True)

    ws_dir = Path(args.workspace).resolve() / "threads" / thread_id
    console.print(f"\n[bold]Workspace:[/] {ws_dir}")
    for name in ("thread.json", "state.json", "events.jsonl", "checkpoints/"):
        console.print(f"  {ws_dir / name}")
    lgx = Path(sys.executable).parent / "lgx"
    lgx_cmd = str(lgx) if lgx.exists() else "lgx"
    hint = f"\nTry: [cyan]{lgx_cmd} --workspace {args.workspace} show {thread_id}[/]"
    console.print(hint, soft_wrap=True)
    console.print(f"     [cyan]cat {ws_dir / 'state.json'}[/]", soft_wrap=True)
    console.print(
        f"     [cyan]{lgx_cmd} --workspace {args.workspace} ui[/]  (browse it: http://127.0.0.1:8765/)",
        soft_wrap=True,
    )
    if not os.environ.get("LGX_DSN"):
        console.print(
            "\nThe embedded PostgreSQL server keeps running for the next process (your app, "
            f"lgx, this demo again). Stop it with: [cyan]{lgx_cmd} --workspace "
            f"{args.workspace} db stop[/]",
            soft_wrap=True,
        )


if __name__ == "__main__":
    main()
