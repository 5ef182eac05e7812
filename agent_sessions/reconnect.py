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
from typing import TYPE_CHECKING, TypeVar

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections

from .storage import backends

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

T = TypeVar("T")


def ready(using: str | None = None) -> BaseDatabaseWrapper:
    """The alias's connection, closed first if the server dropped it outside a transaction (the next
    query reconnects).  One lookup of ``connections`` per read (docs/performance.md, R10)."""
    connection = connections[using or DEFAULT_DB_ALIAS]
    raw = connection.connection
    if raw is not None and not connection.in_atomic_block and backends.for_vendor(connection.vendor).server_closed(raw):
        connection.close()
    return connection


def ensure_connection(using: str | None = None) -> None:
    """Outside a transaction, close the alias's connection if the server dropped it (the next query reconnects)."""
    ready(using)


def read_with_retry(using: str, read: Callable[[], T]) -> T:
    """Run a read; on a connection error outside a transaction, reconnect and run it once more."""
    try:
        return read()
    except (OperationalError, InterfaceError):
        connection = connections[using]
        if connection.in_atomic_block:
            raise
        connection.close()
        return read()
