"""Postgres: the recent window's read as a PL/pgSQL function, ``agent_sessions_recent`` (migration 0025).

``get_recent_history`` reads the newest rows up to the leaf in one statement
(:func:`range_reads.recent_statement`).  Sent by a client, that statement is planned at every
call: its leaf lookup and its overlay probe name the tables three times, and planning took
0.2 ms of a 0.5 ms read, where the bare range scan it stands on plans in 0.07 ms.  Inside a
function the plan is kept per connection (:mod:`~agent_sessions.storage.postgres_plans`,
which also says when it is not: a table too small for the planner to tell its indexes
apart).  The function runs the same statement, generated from the same strings; the rows go
back to :func:`range_reads.read_recent`, which follows the chain and falls back to the walk
as before.  A database without the function (before ``migrate``) gets the statement.
"""

from __future__ import annotations

from . import range_reads, walks
from .postgres_plans import PLANNER_SETTINGS, PRELUDE, return_query

NAME = "agent_sessions_recent"
SIGNATURE = f"{NAME}(text, text, integer)"
CALL = f"SELECT * FROM {NAME}(%s, %s, %s)"
"""The call; parameters: the session id, the leaf's id (None: the latest leaf), the row limit."""

COLUMNS = "octet_length(m.content), m.content, " + walks.HAS_OVERLAYS
"""What the function returns after each row's ``id, parent_id``: its stored size, its content, and
(on every row) whether the session has overlays; parameter: the session id."""

_ARGS = "p_session_id text, p_leaf_id text, p_limit integer"
_RETURNS = "TABLE (id text, parent_id text, bytes integer, content text, has_overlays integer)"


def _read(*, latest: bool, dynamic: bool) -> str:
    names = range_reads.recent_params(
        "postgresql", "p_session_id", None if latest else "p_leaf_id", ["p_session_id"], "p_limit"
    )
    return return_query(range_reads.recent_statement("postgresql", COLUMNS, latest=latest), names, dynamic=dynamic)


def _reads(*, dynamic: bool) -> str:
    return (
        "    IF p_leaf_id IS NULL THEN\n"
        f"      {_read(latest=True, dynamic=dynamic)};\n"
        "    ELSE\n"
        f"      {_read(latest=False, dynamic=dynamic)};\n"
        "    END IF;\n"
    )


def body() -> str:
    """The function's PL/pgSQL source (what ``pg_proc.prosrc`` holds once installed): the statement
    static (its plan kept) once the table keeps plans, else planned at each call."""
    return (
        PRELUDE
        + "  IF mode LIKE '%kept' THEN\n"
        + _reads(dynamic=False)
        + "  ELSE\n"
        + _reads(dynamic=True)
        + "  END IF;\n"
        + "END\n"
    )


def install_sql() -> list[str]:
    """Create (or replace) the function.  Stable: it only reads (the mode it remembers is a setting)."""
    return [
        f"CREATE OR REPLACE FUNCTION {NAME}({_ARGS}) RETURNS {_RETURNS} "
        f"LANGUAGE plpgsql STABLE {PLANNER_SETTINGS} "
        f"AS $agent_sessions_recent${body()}$agent_sessions_recent$"
    ]


UNINSTALL = [f"DROP FUNCTION IF EXISTS {SIGNATURE}"]


def install(apps, schema_editor) -> None:
    """Migration 0025 (``RunPython``): install the function from this code, on Postgres."""
    _run(schema_editor, install_sql())


def uninstall(apps, schema_editor) -> None:
    """Migration 0025's reverse: drop the function (reads then send the statement)."""
    _run(schema_editor, UNINSTALL)


def _run(schema_editor, statements: list[str]) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in statements:
            schema_editor.execute(statement, params=None)
