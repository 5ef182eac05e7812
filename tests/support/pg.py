"""Postgres facts the tests branch on."""

from __future__ import annotations

from django.db import connection


def messages_partitioned() -> bool:
    """Whether ``assistant_messages`` is hash-partitioned (``AGENT_SESSIONS_TEST_PARTITIONS``)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = 'assistant_messages'::regclass")
        return cursor.fetchone()[0] == "p"
