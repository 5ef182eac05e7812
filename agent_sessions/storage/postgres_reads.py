"""Postgres: the range reads as PL/pgSQL functions, ``agent_sessions_recent`` (the recent window),
``agent_sessions_path`` (the whole path) and ``agent_sessions_window`` (a budgeted window's first
read, its size found by the server).

``get_recent_history`` and ``get_history`` read a session's newest rows up to the leaf in one
statement each (:func:`range_reads.recent_statement`, :func:`range_reads.path_statement`).
Sent by a client, such a statement is planned at every call: the leaf lookup, the registry's
count and the overlay probe name four tables, and planning takes 0.2 ms of a 0.25-0.5 ms read,
where the bare range scan they stand on plans in 0.07 ms.  Inside a function the plan is kept
per connection (:mod:`~agent_sessions.storage.postgres_plans`, which also says when it is not:
a table too small for the planner to tell its indexes apart).  Each function runs the same
statement, generated from the same strings; its rows go back to :mod:`range_reads`, which
follows the chain and falls back to the walk as for the statement.  A database without a
function (not yet migrated) gets the statement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import range_reads, walks
from .postgres_plans import PRELUDE, loop_over, return_query


@dataclass(frozen=True)
class ReadFunction:
    """One range read as a function: its name, its arguments ``(name, type)``, the columns it
    returns, and its statement with the argument names in placeholder order, per kind of leaf
    (``latest``: the latest leaf, ``p_leaf_id`` null)."""

    name: str
    args: tuple[tuple[str, str], ...]
    returns: str
    statement: Callable[[bool], tuple[str, list[str]]]
    rows: Callable[..., str] = return_query
    """How the body returns the statement's rows (``rows(sql, names, dynamic=...)``): all of them."""

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(kind for _, kind in self.args)})"

    @property
    def call(self) -> str:
        """The call; parameters: the arguments in order (the leaf's id None for the latest leaf)."""
        return f"SELECT * FROM {self.name}({', '.join(['%s'] * len(self.args))})"

    def _reads(self, *, dynamic: bool) -> str:
        def read(latest: bool) -> str:
            return self.rows(*self.statement(latest), dynamic=dynamic)

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


_LEAF = ("p_leaf_id", "text")
_SESSION = ("p_session_id", "text")


def _leaf(latest: bool) -> str | None:
    return None if latest else "p_leaf_id"


_BYTES = "octet_length(m.content)"
RECENT_COLUMNS = _BYTES + ", m.content, " + walks.HAS_OVERLAYS
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

_RECENT_OUT = ", ".join(column.split()[0] for column in RECENT.returns.split(", "))


ONE_BY_ONE = 64
"""Rows ``agent_sessions_window`` returns one by one, checking the budget at each (about 1 µs a row
in PL/pgSQL), before it reads the rest of the window in bulk (one statement, as ``agent_sessions_recent``).
16, 32, 64 and 128 are within 5 % of each other on 190- and 948-row windows; 64 spares a 48-row
window the second statement (570 against 632 µs)."""


def _window_rows(sql: str, names: list[str], *, dynamic: bool) -> str:
    """Return the rows one by one up to the first past ``p_min`` whose running total of bytes exceeds
    ``p_budget`` (where the walk stops if they are the chain, ``range_reads._recent_suffix``), and
    stop the scan there.  A window longer than :data:`ONE_BY_ONE` rows reads on in bulk from the
    last row's parent, as many rows as the sizes so far say the budget holds (an eighth more, and
    8; ``range_reads._read_on_limit``); if they fall short, the caller reads on again."""
    rest_sql, rest_names = RECENT.statement(False)
    rest = [{"p_leaf_id": "v_from", "p_limit": "v_rest"}.get(name, name) for name in rest_names]
    body = "\n".join(
        [
            "    RETURN NEXT;",
            "    n := n + 1;",
            "    total := total + bytes;",
            "    EXIT WHEN n > p_min AND total > p_budget;",
            f"    IF n >= {ONE_BY_ONE} AND parent_id IS NOT NULL THEN",
            "      v_from := parent_id;",
            "      v_rest := GREATEST(p_min - n, (p_budget - total) / GREATEST(1, total / n) + 1);",
            "      v_rest := LEAST(v_rest + v_rest / 8 + 8, p_limit - n);",
            "      " + return_query(rest_sql, rest, dynamic=dynamic) + ";",
            "      RETURN;",
            "    END IF;",
        ]
    )
    loop = loop_over(_RECENT_OUT, sql, names, body, dynamic=dynamic)
    declare = ["DECLARE", "  n integer := 0;", "  total bigint := 0;", "  v_from text;", "  v_rest bigint;"]
    return "\n      ".join([*declare, "BEGIN", *("  " + line for line in loop.splitlines()), "END"])


WINDOW = ReadFunction(
    "agent_sessions_window",
    (*RECENT.args, ("p_min", "integer"), ("p_budget", "bigint")),
    RECENT.returns,
    RECENT.statement,
    _window_rows,
)
"""A budgeted window's first read (no hint of its size in this process): :data:`RECENT`'s rows,
as many as the server finds the window needs, in one round trip instead of a short read and a
read on; arguments: :data:`RECENT`'s (the limit caps the rows), the window's minimum of messages,
its byte budget."""

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
