"""Reads on the driver's own connection, shared by the vendor modules (each says how to execute).

Django's cursor costs a visible share of a short read (placeholder rewriting, client-side
binding; docs/performance.md, R10). It is kept while queries are logged or wrapped (debug toolbars, query-count
checks, tests), so those still see every read; errors are Django's either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Execute = Callable[[Any, str, list], Any]
"""``execute(driver_connection, sql, params) -> cursor`` of one vendor."""


def fetch(connection: Any, sql: str, params: list, execute: Execute, *, one: bool = False) -> list[tuple]:
    """Rows of a read (at most one with ``one``) through ``execute`` on the bare connection."""
    if connection.queries_logged or connection.execute_wrappers:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return _rows(cursor, one)
    with connection.wrap_database_errors:
        connection.ensure_connection()
        cursor = execute(connection.connection, sql, params)
        try:
            return _rows(cursor, one)
        finally:
            cursor.close()


def _rows(cursor: Any, one: bool) -> list[tuple]:
    if not one:
        return cursor.fetchall()
    row = cursor.fetchone()
    return [row] if row is not None else []
