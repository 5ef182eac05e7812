"""Postgres facts the tests branch on."""

from __future__ import annotations

from collections.abc import Iterator

from django.db import connection


def messages_partitioned() -> bool:
    """Whether ``assistant_messages`` is hash-partitioned (``AGENT_SESSIONS_TEST_PARTITIONS``)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = 'assistant_messages'::regclass")
        return cursor.fetchone()[0] == "p"


def plan_nodes(node: dict) -> Iterator[dict]:
    """Every node of an ``EXPLAIN (FORMAT JSON)`` plan under ``node`` (itself first), depth first."""
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def analyze_with_rows_elsewhere(session_id: str, rows_elsewhere: int) -> None:
    """ANALYZE ``assistant_messages`` after ``rows_elsewhere`` rows of another session (if any): from
    1,000 counted rows the plpgsql functions keep their plans (storage/postgres_plans.py)."""
    from tests.support.build import bulk_chain

    if rows_elsewhere:
        bulk_chain(f"{session_id}-elsewhere", rows_elsewhere)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE assistant_messages")
