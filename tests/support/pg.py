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
