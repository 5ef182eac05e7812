"""The append's SQL: one ``INSERT … SELECT`` that picks the parent, depth and running token total.

Both vendors send the same statement (storage/sqlite.py alone, storage/postgres.py behind
the session's advisory lock), and the benchmark's raw-SQL floor reuses it.
"""

from __future__ import annotations

from .walks import LATEST_LEAF, latest_leaf_params

COLUMNS = "id, session_id, parent_id, role, content, text_content, tool_text, created_at, tokens, depth, path_tokens"

EXPLICIT_PARENT = "SELECT m.id, m.depth, m.path_tokens FROM assistant_messages m WHERE m.session_id = %s AND m.id = %s"
NO_PARENT = "SELECT m.id, m.depth, m.path_tokens FROM assistant_messages m WHERE 1 = 0"

# The parent is chosen inside the INSERT itself; the WHERE clause (which also lets
# SQLite parse ``INSERT … SELECT … ON CONFLICT``) refuses an id that stored rows still
# name as their parent: a deleted message whose children stayed.  Stored again, it would
# adopt them, and under one of them it would close a cycle that every walk would follow
# to the depth limit.  Parameters, in order: the row's values (id, session_id, role,
# content, text_content, tool_text, created_at, tokens), tokens twice more (the path
# total), the parent subquery's, then the session id and the id (:func:`params`).
INSERT = (
    f"INSERT INTO assistant_messages ({COLUMNS}) "
    "SELECT %s, %s, p.id, %s, %s, %s, %s, %s, %s, "
    "CASE WHEN p.id IS NULL THEN 1 ELSE p.depth + 1 END, "
    "CASE WHEN p.id IS NULL THEN %s ELSE p.path_tokens + %s END "
    "FROM (SELECT 1 AS one) AS one LEFT JOIN ({parent}) AS p ON 1 = 1 "
    "WHERE NOT EXISTS (SELECT 1 FROM assistant_messages o WHERE o.session_id = %s AND o.parent_id = %s) "
    "ON CONFLICT (session_id, id) DO NOTHING "
    "RETURNING seq, parent_id, depth, path_tokens"
)


def statement(parent: str | None, *, auto: bool) -> str:
    """:data:`INSERT` with the parent subquery for ``auto`` (latest leaf), ``parent=None`` (root) or an id."""
    if auto:
        return INSERT.format(parent=LATEST_LEAF)
    return INSERT.format(parent=NO_PARENT if parent is None else EXPLICIT_PARENT)


def params(row: list, session_id: str, parent: str | None, *, auto: bool) -> list:
    """The parameters of :func:`statement`: ``row`` is the eight values, then the path totals and the parent's."""
    tokens = row[7]
    if auto:
        tail = latest_leaf_params(session_id)
    else:
        tail = [] if parent is None else [session_id, parent]
    return [*row, tokens, tokens, *tail, session_id, row[0]]
