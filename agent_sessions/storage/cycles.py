"""Parent cycles a foreign writer stored: where a walk's rows start to repeat, and the warning.

The SQL walks (:mod:`agent_sessions.storage.walks`) stop on a cycle by a bound, not at the
repeat; the readers keep the rows before the first repeated one, so every path they return is
a simple path (its root the row whose parent is already on it), and log which rows go round.
"""

from __future__ import annotations

import logging
from typing import Any

from ..exceptions import MessageCycle

logger = logging.getLogger("agent_sessions.cycles")


def root_first(rows: list[Any], session_id: str, *, key: int = 0, parent: int = 1) -> list[Any]:
    """``rows`` (a walk's, root first, the leaf last; ``key`` the id column, ``parent`` the parent
    id's) up to the first repeat seen from the leaf: those below the repeated row.  A walk that
    reached a root (its first row has no parent) has no repeat and costs nothing here."""
    if not rows or rows[0][parent] is None:
        return rows
    seen: set[Any] = set()
    for index in range(len(rows) - 1, -1, -1):
        row_id = rows[index][key]
        if row_id in seen:
            warn(session_id, row_id)
            return rows[index + 1 :]
        seen.add(row_id)
    return rows


def leaf_first(rows: list[Any], session_id: str, *, key: int) -> list[Any]:
    """As :func:`root_first` for rows the leaf first (a recent window's walk)."""
    seen: set[Any] = set()
    for index, row in enumerate(rows):
        if row[key] in seen:
            warn(session_id, row[key])
            return rows[:index]
        seen.add(row[key])
    return rows


def warn(session_id: str, message_id: object) -> None:
    """Log a stored parent cycle met by a read (the read goes on with the path below it)."""
    logger.warning(
        "session %r: message %r is its own ancestor (a parent cycle stored by another writer); "
        "the path is read up to it",
        session_id,
        message_id,
    )


def refuse(session_id: str, message_id: object, what: str) -> MessageCycle:
    """The error of a write that would store or copy a parent cycle."""
    return MessageCycle(f"session {session_id!r}: {what} a parent cycle through message {message_id!r}")
