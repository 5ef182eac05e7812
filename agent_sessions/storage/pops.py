"""Removing a session's latest leaf (``AgentsSession.pop_item``, the adapters' undo): the SQL both
backends run, under the session's write lock, with the registry's ``updated_at`` in the same commit.

A leaf has no children, so deleting it re-derives no subtree; the lock (Postgres: the advisory
lock appends take; SQLite: the write lock) keeps an append from choosing it as a parent meanwhile,
and makes a second pop find the next leaf, so each row is removed and returned once.
"""

from __future__ import annotations

from .appends import TOUCH
from .walks import LATEST_LEAF_SEQ_CONTENT, latest_leaf_params

DELETE_ROW = "DELETE FROM assistant_messages WHERE session_id = %s AND seq = %s"
"""Delete one row by its key; parameters: session id, seq."""

POP_LATEST = (
    "WITH leaf AS MATERIALIZED (" + LATEST_LEAF_SEQ_CONTENT + "), "
    "gone AS (DELETE FROM assistant_messages m USING leaf "
    "WHERE m.session_id = %s AND m.seq = leaf.seq RETURNING m.content), "
    "touched AS (" + TOUCH + " AND EXISTS (SELECT 1 FROM gone)) "
    "SELECT content FROM gone"
)
"""Postgres, one statement (its snapshot taken after the lock): find the latest leaf, delete it, and
stamp the registry row when a row went; returns ``(content,)`` or no row.  Parameters: :func:`pop_params`."""


def pop_params(session_id: str, stamp: object) -> list:
    """Parameters of :data:`POP_LATEST`: the leaf lookup's, the session id, then the stamp and the session id."""
    return [*latest_leaf_params(session_id), session_id, stamp, session_id]
