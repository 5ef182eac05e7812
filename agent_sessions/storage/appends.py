"""The append's SQL: one ``INSERT … SELECT`` that picks the parent, depth and running token total.

Both vendors run the same statement (storage/sqlite.py sends it; on Postgres the function
of storage/postgres_append.py runs it after taking the session's advisory lock), and the
benchmark's raw-SQL floor reuses it.
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
# to the depth limit.  The id and the session come in through the one-row subquery ``incoming``,
# whose LIMIT keeps Postgres from folding them into constants: the children probe then
# costs what the session's average share of the table says, and goes through
# ``(session_id, parent_id)``.  With the constants, a session that the statistics have not
# seen (new since the last ANALYZE, in a table a few big sessions fill) looked like one row
# to every index alike, and the probe took the primary key, reading the whole session at
# every append (docs/performance.md, G4).  A hash-partitioned table is
# the other way round: only constants let the planner prune to the session's partition, and
# without them it probed the partitions by full index scans; there the probe names them.
INSERT = (
    f"INSERT INTO assistant_messages ({COLUMNS}) "
    "SELECT incoming.id, incoming.session_id, p.id, %s, %s, %s, %s, %s, %s, "
    "CASE WHEN p.id IS NULL THEN 1 ELSE p.depth + 1 END, "
    "CASE WHEN p.id IS NULL THEN %s ELSE p.path_tokens + %s END "
    "FROM (SELECT %s AS id, %s AS session_id LIMIT 1) AS incoming LEFT JOIN ({parent}) AS p ON 1 = 1 "
    "WHERE NOT EXISTS (SELECT 1 FROM assistant_messages o WHERE {children}) "
    "ON CONFLICT (session_id, id) DO NOTHING "
    "RETURNING seq, parent_id, depth, path_tokens"
)
_CHILDREN = {
    False: "o.session_id = incoming.session_id AND o.parent_id = incoming.id",
    True: "o.session_id = %s AND o.parent_id = %s",
}


def statement(parent: str | None, *, auto: bool, partitioned: bool = False) -> str:
    """:data:`INSERT` with the parent subquery for ``auto`` (latest leaf), ``parent=None`` (root) or an id,
    and the children probe for a plain or a ``partitioned`` table."""
    if auto:
        chosen = LATEST_LEAF
    else:
        chosen = NO_PARENT if parent is None else EXPLICIT_PARENT
    return INSERT.format(parent=chosen, children=_CHILDREN[partitioned])


def params(row: list, session_id: str, parent: str | None, *, auto: bool, partitioned: bool = False) -> list:
    """The parameters of :func:`statement`, in order: of ``row``'s eight values (id, session_id,
    role, content, text_content, tool_text, created_at, tokens) role to tokens, tokens twice
    more (the path total), the id and the session id, the parent subquery's, and on a
    ``partitioned`` table the session id and the id again (the children probe)."""
    tokens = row[7]
    if auto:
        tail = latest_leaf_params(session_id)
    else:
        tail = [] if parent is None else [session_id, parent]
    probe = [session_id, row[0]] if partitioned else []
    return [*row[2:8], tokens, tokens, row[0], row[1], *tail, *probe]


# The registry's stamp, sent with the append (SessionManager): ``updated_at`` set to the stamp
# the manager's clock gave (manager/clock.py: microseconds, strictly increasing per process),
# in the insert's own transaction.  Sent on its own after the append, it would be a second
# transaction: a second commit and round trip, and on SQLite a second take of the write lock
# (docs/performance.md, A7).
# Only when the message is stored, inserted now or already there (a repeated append still
# counts as the manager's write): an id the insert refused stamps nothing.
TOUCH = "UPDATE assistant_sessions SET updated_at = %s WHERE id = %s"
"""The registry row's ``updated_at`` set to a stamp; parameters: the stamp, the session id."""
STAMP = TOUCH + " AND EXISTS (SELECT 1 FROM assistant_messages WHERE session_id = %s AND id = %s)"


def stamp_params(stamp: object, session_id: str, message_id: str) -> list:
    """The parameters of :data:`STAMP`: the stamp (adapted for the database), the session and the message."""
    return [stamp, session_id, session_id, message_id]
