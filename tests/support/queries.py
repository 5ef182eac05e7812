"""What the library sends: the SQL texts of the queries a call runs on the default connection, and
what a read returns when it sends only the SQL walks."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection

from agent_sessions.storage import range_reads


def sent(fn: Callable[[], object]) -> list[str]:
    """The SQL of every query ``fn()`` runs on the default connection, in order, placeholders kept."""
    texts: list[str] = []

    def wrapper(execute, sql, params, many, context):
        texts.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        fn()
    return texts


def walked(session, method: str, *args, **kwargs):
    """What ``session.method(*args, **kwargs)`` returns when the range reads are never tried (the SQL walks alone)."""
    originals = range_reads.read_path, range_reads.read_recent
    range_reads.read_path = range_reads.read_recent = lambda *a, **k: None
    try:
        return getattr(session, method)(*args, **kwargs)
    finally:
        range_reads.read_path, range_reads.read_recent = originals
