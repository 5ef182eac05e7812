"""Recovering a database connection outside requests (workers, commands, agent loops).

Django replaces a broken connection only at request boundaries.  A long-running loop has
none, so after a database restart every later call would fail with "the connection is
closed".  The library checks its connection before each storage call and, outside a
transaction, drops one the server closed; a read that still fails on a connection error is
retried once on a fresh connection.  Your own ORM code in such a loop should call
:func:`ensure_connection` (or ``django.db.close_old_connections()``) once per iteration.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections

from .storage import backends

T = TypeVar("T")


def ensure_connection(using: str | None = None) -> None:
    """Outside a transaction, close the alias's connection if the server dropped it (the next query reconnects)."""
    connection = connections[using or DEFAULT_DB_ALIAS]
    raw = connection.connection
    if raw is None or connection.in_atomic_block:
        return
    if backends.for_vendor(connection.vendor).server_closed(raw):
        connection.close()


def read_with_retry(using: str, read: Callable[[], T]) -> T:
    """Run a read; on a connection error outside a transaction, reconnect and run it once more."""
    connection = connections[using]
    try:
        return read()
    except (OperationalError, InterfaceError):
        if connection.in_atomic_block:
            raise
        connection.close()
        return read()
