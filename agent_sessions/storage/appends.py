"""The append's SQL: one ``INSERT … SELECT`` that picks the parent, depth and running token total.

SQLite sends the statement as is.  Postgres calls ``agent_sessions_append(…)``, a plpgsql
function (migration 0014) that takes the session's advisory lock and then runs the same
statement: plpgsql keeps each statement's plan for the connection's life, so an append is
no longer planned on every call (the planning cost more than the insert), and a VOLATILE
function takes a fresh snapshot per statement, so the insert still sees every append that
held the lock before it.
"""

from __future__ import annotations

from .walks import LATEST_LEAF, latest_leaf_params

COLUMNS = "id, session_id, parent_id, role, content, text_content, tool_text, created_at, tokens, depth, path_tokens"

EXPLICIT_PARENT = "SELECT m.id, m.depth, m.path_tokens FROM assistant_messages m WHERE m.session_id = %s AND m.id = %s"
NO_PARENT = "SELECT m.id, m.depth, m.path_tokens FROM assistant_messages m WHERE 1 = 0"

# The parent is chosen inside the INSERT itself; ``WHERE true`` lets SQLite
# parse ``INSERT … SELECT … ON CONFLICT``.  Parameters, in order: the row's
# values (id, session_id, role, content, text_content, tool_text, created_at,
# tokens), tokens twice more (the path total), then the parent subquery's.
INSERT = (
    f"INSERT INTO assistant_messages ({COLUMNS}) "
    "SELECT %s, %s, p.id, %s, %s, %s, %s, %s, %s, "
    "CASE WHEN p.id IS NULL THEN 1 ELSE p.depth + 1 END, "
    "CASE WHEN p.id IS NULL THEN %s ELSE p.path_tokens + %s END "
    "FROM (SELECT 1 AS one) AS one LEFT JOIN ({parent}) AS p ON 1 = 1 "
    "WHERE true ON CONFLICT (session_id, id) DO NOTHING "
    "RETURNING seq, parent_id, depth, path_tokens"
)

# The function's parameters standing in for INSERT's row placeholders (tokens: the row's and the path total's).
_ROW_PARAMS: tuple[str, ...] = ("p_id", "p_session_id", "p_role", "p_content", "p_text_content", "p_tool_text")
_ROW_PARAMS += ("p_created_at", "p_tokens", "p_tokens", "p_tokens")


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
    return [*row, tokens, tokens, *tail]


def _named(sql: str, names: tuple[str, ...]) -> str:
    """``sql`` with its ``%s`` placeholders replaced, in order, by plpgsql parameter names."""
    pieces = sql.split("%s")
    if len(pieces) != len(names) + 1:
        raise ValueError("placeholder count mismatch")
    return "".join(piece + name for piece, name in zip(pieces, names, strict=False)) + pieces[-1]


FUNCTION = "agent_sessions_append"

_SIGNATURE = (
    "p_id text, p_session_id text, p_role text, p_content text, p_text_content text, p_tool_text text, "
    "p_created_at timestamptz, p_tokens integer, p_parent text, p_auto_parent boolean"
)


def function_sql() -> str:
    """``CREATE OR REPLACE FUNCTION agent_sessions_append(…)``: lock, then one of the three inserts.

    ``#variable_conflict use_column``: the output columns share names with table columns.
    Zero rows back means the id already existed (nothing written).
    """
    auto = _named(statement(None, auto=True), (*_ROW_PARAMS, "p_session_id", "p_session_id"))
    root = _named(statement(None, auto=False), _ROW_PARAMS)
    explicit = _named(statement("", auto=False), (*_ROW_PARAMS, "p_session_id", "p_parent"))
    return (
        f"CREATE OR REPLACE FUNCTION {FUNCTION}({_SIGNATURE}) "
        "RETURNS TABLE (seq bigint, parent_id text, depth integer, path_tokens bigint) "
        "LANGUAGE plpgsql VOLATILE AS $fn$\n"
        "#variable_conflict use_column\n"
        "BEGIN\n"
        "    PERFORM pg_advisory_xact_lock(hashtextextended('agent_sessions:' || p_session_id, 0));\n"
        f"    IF p_auto_parent THEN\n        RETURN QUERY {auto};\n"
        f"    ELSIF p_parent IS NULL THEN\n        RETURN QUERY {root};\n"
        f"    ELSE\n        RETURN QUERY {explicit};\n"
        "    END IF;\n"
        "END\n$fn$"
    )


DROP_FUNCTION = f"DROP FUNCTION IF EXISTS {FUNCTION}({_SIGNATURE})"
REGPROCEDURE = f"{FUNCTION}(text, text, text, text, text, text, timestamptz, integer, text, boolean)"
"""The function's signature as ``to_regprocedure()`` reads it (is the migration applied?)."""

CALL = f"SELECT seq, parent_id, depth, path_tokens FROM {FUNCTION}(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
"""The call; parameters: the eight row values, the explicit parent (or None), whether to auto-parent."""
