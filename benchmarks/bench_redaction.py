#!/usr/bin/env python
"""What redaction costs per recorded payload, with and without secrets in it.

Run from the repository root::

    .venv/bin/python benchmarks/bench_redaction.py
    .venv/bin/python benchmarks/bench_redaction.py --level strict --number 5000

Every figure is the best of ``--repeat`` runs of ``--number`` calls (the minimum is the
least disturbed by other work on a shared machine). "per string" divides by the number
of strings and dict keys in the payload, the unit the redactor scans. The baseline row
is ``json.dumps`` of the same payload: the pipeline serializes every payload once
anyway, so it is the natural yardstick.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph_external.record.redaction import Redactor


def _jwt() -> str:
    def seg(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    header, claims = seg({"alg": "HS256", "typ": "JWT"}), seg({"sub": "u-42", "exp": 1900000000})
    return f"{header}.{claims}.c2lnbmF0dXJl"


def payloads() -> dict[str, Any]:
    """Typical event payloads (what the callback handler records), clean and with secrets."""
    prose = (
        "The weather in Paris is 18C and sunny, with light winds from the west. "
        "Tomorrow brings clouds in the morning and rain by 4pm; take an umbrella."
    )
    tool_start = {
        "name": "get_weather",
        "tool_call_id": "call_8c1f2b7d9e0a4c3b",
        "args": {"city": "Paris", "units": "metric", "days": 3},
        "started": "2024-05-01T12:34:56.789Z",
    }
    tool_end = {
        "name": "get_weather",
        "tool_call_id": "call_8c1f2b7d9e0a4c3b",
        "output": json.dumps({"temp": 18, "conditions": "sunny", "wind_kph": 12}),
        "status": "success",
        "duration_ms": 412.5,
    }
    llm_start = {
        "model": "gpt-4o-mini",
        "params": {"temperature": 0.2, "max_tokens": 512},
        "messages": [
            {"role": "system", "content": "You are a helpful travel assistant."},
            {"role": "user", "content": "What's the weather in Paris this week?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_8c1f2b7d9e0a4c3b",
                        "name": "get_weather",
                        "args": {"city": "Paris"},
                    }
                ],
            },
            {"role": "tool", "content": prose, "tool_call_id": "call_8c1f2b7d9e0a4c3b"},
        ],
        "prompt_context_hash": "9f2c1e" * 10 + "abcd",
        "run_id": "550e8400-e29b-41d4-a716-446655440000",
    }
    state = {
        "messages": llm_start["messages"],
        "user_id": "u-1042",
        "order_id": "ORD-2024-000123",
        "updated": "2024-05-01T12:35:02Z",
        "counter": 7,
    }
    secret_tool = {
        **tool_start,
        "args": {
            "url": "https://api.example.com/v1/charge",
            "headers": {"Authorization": "Bearer sk-proj-Qm9vQ2hhcmdlS2V5MTIzNDU2Nzg5MA"},
            "card": "4242 4242 4242 4242",
            "db": "postgresql://app:s3cr3t-pw@db.internal:5432/shop",
        },
    }
    secret_result = {
        **tool_end,
        "output": json.dumps(
            {"token": _jwt(), "aws": "AKIAIOSFODNN7EXAMPLE", "note": "rotate ghp_" + "a1B2" * 9}
        ),
    }
    return {
        "tool_start": tool_start,
        "tool_end": tool_end,
        "llm_start": llm_start,
        "state": state,
        "tool_start+secrets": secret_tool,
        "tool_end+secrets": secret_result,
    }


def count_strings(value: Any) -> int:
    if isinstance(value, str):
        return 1
    if isinstance(value, dict):
        return sum(1 + count_strings(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(count_strings(v) for v in value)
    return 0


def best_us(fn: Any, number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--level", default="standard", choices=["standard", "strict"])
    ap.add_argument("--number", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    redactor = Redactor(args.level)
    print(f"Redactor(level={args.level!r}); best of {args.repeat} x {args.number} calls\n")
    header = f"{'payload':22s} {'strings':>7s} {'found':>5s} {'us/payload':>10s} {'us/string':>9s}"
    print(header + f" {'json.dumps us':>13s} {'ratio':>6s}")
    for name, payload in payloads().items():
        n_str = count_strings(payload)
        _, found = redactor(payload)
        us = best_us(lambda p=payload: redactor(p), args.number, args.repeat)
        base = best_us(lambda p=payload: json.dumps(p), args.number, args.repeat)
        print(
            f"{name:22s} {n_str:7d} {found:5d} {us:10.2f} {us / n_str:9.2f}"
            f" {base:13.2f} {us / base:6.2f}"
        )
    print("\nsingle strings (us):")
    samples = [
        "assistant",
        "get_weather",
        "call_8c1f2b7d9e0a4c3b",
        "2024-05-01T12:34:56.789Z",
        "550e8400-e29b-41d4-a716-446655440000",
        "What's the weather in Paris this week?",
        '{"temp": 18, "conditions": "sunny", "wind_kph": 12}',
        "https://api.example.com/v1/items?page=2",
        "Bearer sk-proj-Qm9vQ2hhcmdlS2V5MTIzNDU2Nzg5MA",
    ]
    for s in samples:
        us = best_us(lambda s=s: redactor.text(s), args.number * 5, args.repeat)
        print(f"  {us:6.2f}  {s!r}")


if __name__ == "__main__":
    main()
