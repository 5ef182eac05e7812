"""Short statements on one session's registry row and message keys, run on every API request.

Written out rather than built by the ORM: its query compilation and model instantiation cost several
times the statement itself (tests/test_api_queries.py pins the tables these name).  Plain SQL that both
vendors run as it is.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from django.db import connections

from .appends import TOUCH

SESSION_STATE = "SELECT end_reason FROM assistant_sessions WHERE id = %s"
OWNED = " AND owner_id = %s"
MESSAGE_EXISTS = "SELECT 1 FROM assistant_messages WHERE session_id = %s AND id = %s"


class SessionState(NamedTuple):
    """What a route checks on a session row before it acts: whether (and why) it has ended."""

    end_reason: str | None


def session_state(using: str, session_id: str, *, owner_id: Any = None) -> SessionState | None:
    """The registry row's state, or None when there is no such row (or, with ``owner_id``, not that owner's)."""
    sql, params = SESSION_STATE, [session_id]
    if owner_id is not None:
        sql += OWNED
        params.append(owner_id)
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else SessionState(row[0])


def message_exists(using: str, session_id: str, message_id: str) -> bool:
    """Whether the session stores a message with that id (one primary-key lookup)."""
    with connections[using].cursor() as cursor:
        cursor.execute(MESSAGE_EXISTS, [session_id, message_id])
        return cursor.fetchone() is not None


def touch(using: str, session_id: str, stamp: datetime) -> None:
    """Set the registry row's ``updated_at`` to ``stamp``."""
    connection = connections[using]
    value = connection.ops.adapt_datetimefield_value(stamp)
    with connection.cursor() as cursor:
        cursor.execute(TOUCH, [value, session_id])
