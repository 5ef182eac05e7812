"""What the library sends: the SQL texts of the queries a call runs on the default connection."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection


def sent(fn: Callable[[], object]) -> list[str]:
    """The SQL of every query ``fn()`` runs on the default connection, in order, placeholders kept."""
    texts: list[str] = []

    def wrapper(execute, sql, params, many, context):
        texts.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        fn()
    return texts
