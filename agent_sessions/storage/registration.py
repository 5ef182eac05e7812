"""A session's row in the sessions registry (``assistant_sessions``), made when its first message is.

Without a registry row a conversation is in no list (the admin, ``GET /api/sessions``), so every
writer of messages that is not the manager (a bare ``Session``, an adapter, an import) makes one.
One ``INSERT … ON CONFLICT DO NOTHING`` per storage object and session id, in the transaction of
its first append, never one per message: a row that exists (the manager's, another process's)
is left as it is, owner included.  Plain SQL that both vendors run as it is.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connections

REGISTER = (
    "INSERT INTO assistant_sessions (id, name, source, owner_id, created_at, updated_at) "
    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING"
)


def owner_pk(owner: Any) -> Any:
    """The primary key of ``owner``: a user object's ``pk``, or the value itself (a pk, or None)."""
    return getattr(owner, "pk", owner)


def register(
    cursor: Any, session_id: str, *, stamp: datetime, owner: Any = None, name: str = "", source: str | None = None
) -> bool:
    """Make the session's registry row unless one exists; True when this call made it.

    ``owner``: a user (or its pk) who then sees the session in the API; None: staff only.  The
    insert trigger gives a new row the count of messages already stored.  ``cursor`` is a Django
    cursor of the session's database; ``stamp`` becomes ``created_at`` and ``updated_at``.
    """
    value = cursor.db.ops.adapt_datetimefield_value(stamp)
    cursor.execute(REGISTER, [session_id, name, source, owner_pk(owner), value, value])
    return cursor.rowcount == 1


def register_using(
    using: str, session_id: str, *, stamp: datetime, owner: Any = None, name: str = "", source: str | None = None
) -> bool:
    """:func:`register` on a cursor of the database ``using`` (its own statement, autocommitted unless inside
    a transaction)."""
    with connections[using].cursor() as cursor:
        return register(cursor, session_id, stamp=stamp, owner=owner, name=name, source=source)
