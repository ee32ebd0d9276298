"""Ad-hoc SQL over the ledger: the logic behind ``lgx sql``.

A session is prepared with the ledger schema first on its search path and read-only
transactions (:func:`prepare_session`); :func:`run_query` runs the user's statements and
returns every result; :func:`example_queries` prints recipes with the thread id and node
quoted as SQL literals.

Example:
    >>> "'o''brien'" in example_queries(thread_id="o'brien")
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from langgraph_external.ledger import schema as ledger

__all__ = [
    "EXAMPLE_QUERIES",
    "SET_READ_ONLY",
    "SET_SEARCH_PATH",
    "QueryResult",
    "example_queries",
    "prepare_session",
    "run_query",
]

SET_SEARCH_PATH = "set search_path to {schema}, public"
SET_READ_ONLY = "set default_transaction_read_only = on"

EXAMPLE_QUERIES = """\
-- Events of a thread, in order
select seq, ts, kind, node, step, name, status
from {s}.events
where thread_id = {t}
order by seq;

-- The path a thread took: its root checkpoints step by step, and the nodes that wrote them
select step, source, nodes, checkpoint_id, parent_checkpoint_id, created_at
from {s}.transitions
where thread_id = {t} and checkpoint_ns = ''
order by created_at;

-- The lineage of the latest checkpoint only (follows parent links, so forks are left out)
with recursive path as (
    (select checkpoint_id, parent_checkpoint_id, step, nodes
     from {s}.checkpoints
     where thread_id = {t} and checkpoint_ns = ''
     order by created_at desc
     limit 1)
    union all
    select c.checkpoint_id, c.parent_checkpoint_id, c.step, c.nodes
    from {s}.checkpoints c
    join path p on c.checkpoint_id = p.parent_checkpoint_id
    where c.thread_id = {t} and c.checkpoint_ns = ''
)
select step, nodes, checkpoint_id from path order by step;

-- Checkpoints written by a node, across all threads
select thread_id, checkpoint_ns, checkpoint_id, step, created_at
from {s}.checkpoints
where {n} = any(nodes)
order by created_at desc
limit 100;

-- What a node wrote (pending writes recorded per task)
select thread_id, seq, ts, checkpoint_id, task_id, payload
from {s}.events
where kind = 'writes' and node = {n}
order by ts desc
limit 100;

-- Event counts per kind in a thread
select kind, count(*) as events
from {s}.events
where thread_id = {t}
group by kind
order by events desc;

-- Threads, most recently updated first
select * from {s}.thread_summary order by updated_at desc;
"""


def example_queries(
    schema: str = ledger.DEFAULT_SCHEMA, thread_id: str = "thread-42", node: str = "agent"
) -> str:
    """Example SQL over the ledger, with the thread id and node quoted as SQL literals.

    Example:
        >>> "'o''brien'" in example_queries(thread_id="o'brien")
        True
    """
    return EXAMPLE_QUERIES.format(
        s=sql.Identifier(ledger.validate_schema(schema)).as_string(),
        t=sql.Literal(thread_id).as_string(),
        n=sql.Literal(node).as_string(),
    )


@dataclass
class QueryResult:
    """The outcome of one statement.

    Attributes:
        columns: column names; empty for a statement that returns no rows (``set``, ...).
        rows: the rows, as tuples.
        status: the server's command tag (``SELECT 3``, ``UPDATE 1``, ``SET``).
    """

    columns: list[str]
    rows: list[tuple[Any, ...]]
    status: str | None


def prepare_session(
    conn: psycopg.Connection[Any], schema: str = ledger.DEFAULT_SCHEMA, *, read_only: bool = True
) -> None:
    """Put the ledger schema first on the search path; make transactions read-only.

    Read-only protects against accidents (a stray ``delete``), not against a user who
    turns it off again in SQL.
    """
    conn.execute(ledger.q(SET_SEARCH_PATH, schema))
    if read_only:
        conn.execute(SET_READ_ONLY)


def run_query(conn: psycopg.Connection[Any], query: str) -> list[QueryResult]:
    """Run ``query`` (one or more statements, no parameters) and return every result.

    Raises:
        psycopg.Error: the server rejected a statement (earlier statements of an
            autocommit connection stay applied).
    """
    results: list[QueryResult] = []
    with conn.cursor() as cur:
        cur.execute(query.encode())  # bytes: the text is the user's, no placeholders
        while True:
            rows = list(cur.fetchall()) if cur.description is not None else []
            columns = [c.name for c in cur.description or ()]
            results.append(QueryResult(columns, rows, cur.statusmessage))
            if not cur.nextset():
                break
    return results
