"""After-sales refund flow, guarded by a declared transition policy.

validate order -> check return policy -> get logistics (retry <= 2) -> process refund,
or escalate to a human. Tools carry permission tiers: ``issue_refund`` is
``remote_write`` and only ``process_refund`` may call it (``refund_policy.yaml``).

Run it (embedded PostgreSQL, no setup; the "LLM" decisions are scripted)::

    python examples/refund_flow.py [--workspace DIR]

It runs three orders: a normal refund, a shipment that never shows up (the logistics
retry loop hits its limit), and a "prompt-injected" policy check that tries to pay the
refund itself — the guard refuses the tool call before it executes and routes the order
to a human. Every violation is printed from the Postgres ledger.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

POLICY_FILE = Path(__file__).with_name("refund_policy.yaml")
PAID: list[str] = []  # orders the refund tool actually paid


class RefundState(TypedDict, total=False):
    order_id: str
    order: dict[str, Any]
    eligible: bool
    shipment: str
    attempts: int
    refund_id: str
    status: str


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order."""
    return {"order_id": order_id, "amount": 42.5, "days_since_delivery": 3}


@tool
def check_return_window(days_since_delivery: int) -> bool:
    """Whether the order is still inside the 30-day return window."""
    return days_since_delivery <= 30


@tool
def track_shipment(order_id: str) -> str:
    """Where the returned parcel is: 'in_transit' until the carrier scans it."""
    return "lost" if order_id.endswith("lost") else "returned"


@tool
def issue_refund(order_id: str, amount: float) -> str:
    """Pay the customer back (remote write: moves money)."""
    PAID.append(order_id)
    return f"rf-{order_id}"


def validate_order(state: RefundState) -> RefundState:
    return {"order": lookup_order.invoke({"order_id": state["order_id"]})}


def check_return_policy(state: RefundState) -> RefundState:
    if state["order_id"].endswith("injected"):
        # a prompt-injected agent "helpfully" pays right away: refused by the tool tier
        issue_refund.invoke({"order_id": state["order_id"], "amount": 1000.0})
    days = state["order"]["days_since_delivery"]
    return {"eligible": check_return_window.invoke({"days_since_delivery": days})}


def get_logistics(state: RefundState) -> RefundState:
    shipment = track_shipment.invoke({"order_id": state["order_id"]})
    return {"shipment": shipment, "attempts": state.get("attempts", 0) + 1}


def process_refund(state: RefundState) -> RefundState:
    amount = state["order"]["amount"]
    refund_id = issue_refund.invoke({"order_id": state["order_id"], "amount": amount})
    return {"refund_id": refund_id, "status": "refunded"}


def escalate_to_human(state: RefundState) -> RefundState:
    return {"status": "escalated"}


def build_graph() -> StateGraph[Any]:
    """The flow as LangGraph sees it (unguarded); the policy is applied by :func:`main`."""
    b: StateGraph[Any] = StateGraph(RefundState)
    for fn in (
        validate_order,
        check_return_policy,
        get_logistics,
        process_refund,
        escalate_to_human,
    ):
        b.add_node(fn.__name__, fn)
    b.add_edge(START, "validate_order")
    b.add_conditional_edges(
        "validate_order",
        lambda s: "check_return_policy" if s.get("order") else "escalate_to_human",
        ["check_return_policy", "escalate_to_human"],
    )
    b.add_conditional_edges(
        "check_return_policy",
        lambda s: "get_logistics" if s.get("eligible") else "escalate_to_human",
        ["get_logistics", "escalate_to_human"],
    )
    # retries until the parcel is back; the policy's max_visits bounds the loop
    b.add_conditional_edges(
        "get_logistics",
        lambda s: "process_refund" if s.get("shipment") == "returned" else "get_logistics",
        ["get_logistics", "process_refund", "escalate_to_human"],
    )
    b.add_edge("process_refund", END)
    b.add_edge("escalate_to_human", END)
    return b


def main(workspace: str | None = None) -> dict[str, Any]:
    """Run three orders through the guarded flow; returns each order's final state."""
    from langgraph_external import External
    from langgraph_external.guards import TransitionPolicy, guard

    workspace = workspace or tempfile.mkdtemp(prefix="lgx-refund-")
    policy = TransitionPolicy.from_file(POLICY_FILE)
    results: dict[str, Any] = {}
    with External(workspace=workspace) as ext:
        builder = guard(build_graph(), policy, pipeline=ext.pipeline)
        graph = builder.compile(checkpointer=ext.checkpointer)
        for order_id in ("A-100", "B-200-lost", "C-300-injected"):
            thread = f"refund-{order_id}"
            results[order_id] = graph.invoke({"order_id": order_id}, ext.config(thread))
            print(f"{order_id:16} -> {results[order_id].get('status')}")
            for e in ext.events(thread):
                if e["kind"] == "policy_violation":
                    p = e["payload"]
                    print(f"{'':19}{e['name']} {p['from']} -> {p['to']}: {e['status']}")
    print(f"paid: {PAID}   policy sha256 {policy.hash[:12]}   workspace {workspace}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", default=None)
    main(parser.parse_args().workspace)
