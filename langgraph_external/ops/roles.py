"""Least privilege: an application role that can append to the record, never rewrite it.

The schema owner (who runs ``lgx setup``) owns every ledger object. The application's
role gets exactly what recording needs:

* ``captures``: ``INSERT`` (what commits in the saver's transaction); sealed captures are
  deleted only by ``seal_thread`` (``SECURITY DEFINER``, v7), in the transaction that
  stores their events;
* ``events``: ``SELECT`` and ``INSERT`` only, so no ``UPDATE``, ``DELETE`` or
  ``TRUNCATE``: the record is append-only even against the application;
* ``threads``: ``SELECT`` only; heads move through ``advance_thread`` and a deleted
  thread's history goes through ``forget_thread`` (both ``SECURITY DEFINER``, see the v5
  migration), which only ever move a head forward from where its writer saw it, and only
  drop events older than a recorded ``thread_deleted`` tombstone, which stays;
* ``artifacts`` (large payload values, v9): ``SELECT`` and ``INSERT`` only;
* the Merkle log of head moves (v14: ``log_state``, ``log_leaves``, ``signed_heads``,
  ``log_keys``): ``SELECT`` only. A leaf is appended only by ``advance_thread``, from
  the head it moves; a signed head is stored only by ``store_signed_head``, which takes
  nothing but a head of the log as it is; a verifier key only by ``register_log_key``
  (all ``SECURITY DEFINER``). Signing needs the Ed25519 key, which the database never
  holds;
* ``checkpoints`` (the checkpoint index, derived from the events and checked against them
  by ``lgx verify``) and ``projection_cursors`` (operational): read and write;
* the official saver's tables (the application's own state, schema ``public``): read
  and write, as the saver needs.

Every other function of the schema (the v4 ``advance_thread`` that sets no keyed tag) is
revoked from ``PUBLIC``.

``capture_only=True`` is for apps that seal nothing themselves (``External(...,
sealing="worker")``): such a role may read and insert captures and use the saver's tables,
nothing else — the ``lgx worker`` processes run as a role with the full grants.

Example:
    >>> text = grant_script("langgraph_external", "lgx_app")
    >>> "grant insert on langgraph_external.events to lgx_app" in text
    True
    >>> "update" in text.split("events")[1].split(";")[0]
    False
"""

from __future__ import annotations

import re
from typing import Any

import psycopg

from langgraph_external.errors import ConfigurationError
from langgraph_external.ledger import schema as ledger
from langgraph_external.upstream import saver_ops

__all__ = ["SAVER_TABLES", "apply_grants", "grant_script", "grant_statements"]

_ROLE = re.compile(r"^[a-z_][a-z0-9_$]{0,62}$")

SAVER_TABLES = saver_ops.TABLES
"""The official Postgres saver's tables (schema ``public``)."""

_GRANTS = """
revoke all on all tables in schema {schema} from {role};
revoke all on all functions in schema {schema} from public;
grant usage on schema {schema} to {role};
grant select on all tables in schema {schema} to {role};
grant insert on {schema}.captures to {role};
grant usage on sequence {schema}.captures_id_seq to {role};
grant insert on {schema}.events to {role};
grant insert on {schema}.artifacts to {role};
grant insert, update, delete on {schema}.checkpoints to {role};
grant insert, update on {schema}.projection_cursors to {role};
grant execute on function {schema}.advance_thread(text, bigint, text, bigint, text,
    timestamptz, text) to {role};
grant execute on function {schema}.forget_thread(text, bigint, timestamptz) to {role};
grant execute on function {schema}.seal_thread(text, bigint, text, bigint, text,
    timestamptz, text, bigint[]) to {role};
grant execute on function {schema}.artifact_text(text, jsonb) to {role};
grant execute on function {schema}.artifact_bytes(text, text) to {role};
grant execute on function {schema}.store_signed_head(text, bigint, bigint, bytea,
    timestamptz, text) to {role};
grant execute on function {schema}.register_log_key(text) to {role};
grant execute on function {schema}.log_snapshot() to {role};
grant usage on schema public to {role};
"""

_CAPTURE_ONLY = """
revoke all on all tables in schema {schema} from {role};
revoke all on all functions in schema {schema} from public;
grant usage on schema {schema} to {role};
grant select on all tables in schema {schema} to {role};
grant insert, select on {schema}.captures to {role};
grant usage on sequence {schema}.captures_id_seq to {role};
grant execute on function {schema}.artifact_text(text, jsonb) to {role};
grant execute on function {schema}.artifact_bytes(text, text) to {role};
grant usage on schema public to {role};
"""


def _check(schema: str, role: str) -> None:
    ledger.validate_schema(schema)
    if not isinstance(role, str) or not _ROLE.match(role) or role == "public":
        raise ConfigurationError(
            f"role name {role!r} must match [a-z_][a-z0-9_$]* (at most 63 characters)"
        )


def grant_statements(
    schema: str, role: str, *, saver: bool = True, capture_only: bool = False
) -> list[str]:
    """The SQL statements (plain identifiers, checked) that set ``role`` up.

    Args:
        schema: the ledger schema.
        role: the application's role (must exist; created by your administrator).
        saver: also grant read/write on the official saver's tables in ``public``.
        capture_only: the role only captures (an app with ``sealing="worker"``).

    Raises:
        ConfigurationError: the schema or role name is not a plain identifier.
    """
    _check(schema, role)
    text = (_CAPTURE_ONLY if capture_only else _GRANTS).format(schema=schema, role=role)
    out = [" ".join(s.split()) for s in text.split(";") if s.strip()]
    if saver:
        tables = ", ".join(f"public.{t}" for t in SAVER_TABLES)
        out.append(f"grant select, insert, update, delete on {tables} to {role}")
    return out


def grant_script(schema: str, role: str, *, saver: bool = True, capture_only: bool = False) -> str:
    """:func:`grant_statements` as a script to review or give to ``psql``."""
    statements = grant_statements(schema, role, saver=saver, capture_only=capture_only)
    return "".join(s + ";\n" for s in statements)


def apply_grants(
    conn: psycopg.Connection[Any],
    schema: str,
    role: str,
    *,
    saver: bool | None = None,
    capture_only: bool = False,
) -> list[str]:
    """Apply the grants in one transaction (run as the schema owner, after ``setup``).

    ``saver=None`` grants on the official saver's tables when they exist. Returns the
    statements applied.

    Raises:
        ConfigurationError: the role does not exist, or a name is not an identifier.
    """
    _check(schema, role)
    row = conn.execute("select 1 from pg_roles where rolname = %s", (role,)).fetchone()
    if row is None:
        raise ConfigurationError(
            f"role {role!r} does not exist: create it first "
            f"(create role {role} login password '...')"
        )
    if saver is None:
        found = conn.execute(saver_ops.HAS_BLOBS_TABLE).fetchone()
        saver = found is not None and found[0] is not None
    statements = grant_statements(schema, role, saver=saver, capture_only=capture_only)
    with conn.transaction():
        for stmt in statements:
            conn.execute(stmt.encode())
    return statements
