"""Postgres: the two range reads as PL/pgSQL functions, ``agent_sessions_recent`` (migration 0025,
the recent window) and ``agent_sessions_path`` (0026, the whole path).

``get_recent_history`` and ``get_history`` read a session's newest rows up to the leaf in one
statement each (:func:`range_reads.recent_statement`, :func:`range_reads.path_statement`).
Sent by a client, such a statement is planned at every call: the leaf lookup, the registry's
count and the overlay probe name four tables, and planning took 0.2 ms of a 0.25-0.5 ms read,
where the bare range scan they stand on plans in 0.07 ms.  Inside a function the plan is kept
per connection (:mod:`~agent_sessions.storage.postgres_plans`, which also says when it is not:
a table too small for the planner to tell its indexes apart).  Each function runs the same
statement, generated from the same strings; its rows go back to :mod:`range_reads`, which
follows the chain and falls back to the walk as before.  A database without a function (before
``migrate``) gets the statement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import range_reads, walks
from .ddl import run_on_postgres
from .postgres_plans import PLANNER_SETTINGS, PRELUDE, return_query


@dataclass(frozen=True)
class ReadFunction:
    """One range read as a function: its name, its arguments ``(name, type)``, the columns it
    returns, and its statement with the argument names in placeholder order, per kind of leaf
    (``latest``: the latest leaf, ``p_leaf_id`` null)."""

    name: str
    args: tuple[tuple[str, str], ...]
    returns: str
    statement: Callable[[bool], tuple[str, list[str]]]

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(kind for _, kind in self.args)})"

    @property
    def call(self) -> str:
        """The call; parameters: the arguments in order (the leaf's id None for the latest leaf)."""
        return f"SELECT * FROM {self.name}({', '.join(['%s'] * len(self.args))})"

    def _reads(self, *, dynamic: bool) -> str:
        def read(latest: bool) -> str:
            return return_query(*self.statement(latest), dynamic=dynamic)

        return f"    IF p_leaf_id IS NULL THEN\n      {read(True)};\n    ELSE\n      {read(False)};\n    END IF;\n"

    def body(self) -> str:
        """The PL/pgSQL source (what ``pg_proc.prosrc`` holds once installed): the statement static
        (its plan kept) once the table keeps plans, else planned at each call."""
        return (
            PRELUDE
            + "  IF mode LIKE '%kept' THEN\n"
            + self._reads(dynamic=False)
            + "  ELSE\n"
            + self._reads(dynamic=True)
            + "  END IF;\n"
            + "END\n"
        )

    def install_sql(self) -> list[str]:
        """Create (or replace) the function.  Stable: it only reads (the mode it remembers is a setting)."""
        args = ", ".join(f"{name} {kind}" for name, kind in self.args)
        return [
            f"CREATE OR REPLACE FUNCTION {self.name}({args}) RETURNS TABLE ({self.returns}) "
            f"LANGUAGE plpgsql STABLE {PLANNER_SETTINGS} "
            f"AS $agent_sessions_read${self.body()}$agent_sessions_read$"
        ]

    def uninstall_sql(self) -> list[str]:
        return [f"DROP FUNCTION IF EXISTS {self.signature}"]


_LEAF = ("p_leaf_id", "text")
_SESSION = ("p_session_id", "text")


def _leaf(latest: bool) -> str | None:
    return None if latest else "p_leaf_id"


RECENT_COLUMNS = "octet_length(m.content), m.content, " + walks.HAS_OVERLAYS
"""What ``agent_sessions_recent`` returns after each row's ``id, parent_id``: its stored size, its
content, and (on every row) whether the session has overlays; parameter: the session id."""

RECENT = ReadFunction(
    "agent_sessions_recent",
    (_SESSION, _LEAF, ("p_limit", "integer")),
    "id text, parent_id text, bytes integer, content text, has_overlays integer",
    lambda latest: (
        range_reads.recent_statement("postgresql", RECENT_COLUMNS, latest=latest),
        range_reads.recent_params("postgresql", "p_session_id", _leaf(latest), ["p_session_id"], "p_limit"),
    ),
)
"""``get_recent_history``'s range read; arguments: the session, the leaf (None: the latest), the row limit."""

PATH_COLUMNS = "m.content, " + walks.HAS_OVERLAYS
"""What ``agent_sessions_path`` returns after each row's ``id, parent_id``: its content and (on every
row) whether the session has overlays; parameter: the session id."""

PATH = ReadFunction(
    "agent_sessions_path",
    (_SESSION, _LEAF),
    "id text, parent_id text, content text, has_overlays integer",
    lambda latest: (
        range_reads.path_statement(PATH_COLUMNS, latest=latest),
        range_reads.path_params("p_session_id", _leaf(latest), ["p_session_id"]),
    ),
)
"""``get_history``'s range read; arguments: the session, the leaf (None: the latest)."""


def install_recent(apps, schema_editor) -> None:
    """Migration 0025 (``RunPython``): install ``agent_sessions_recent`` from this code, on Postgres."""
    run_on_postgres(schema_editor, RECENT.install_sql())


def uninstall_recent(apps, schema_editor) -> None:
    """Migration 0025's reverse: drop it (reads then send the statement)."""
    run_on_postgres(schema_editor, RECENT.uninstall_sql())


def install_path(apps, schema_editor) -> None:
    """Migration 0026 (``RunPython``): install ``agent_sessions_path`` from this code, on Postgres."""
    run_on_postgres(schema_editor, PATH.install_sql())


def uninstall_path(apps, schema_editor) -> None:
    """Migration 0026's reverse: drop it (reads then send the statement)."""
    run_on_postgres(schema_editor, PATH.uninstall_sql())
