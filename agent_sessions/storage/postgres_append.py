"""Postgres: the append as a PL/pgSQL function, ``agent_sessions_append``.

A statement sent by a client is parsed and planned on every append; planning alone is about
0.26 ms of a 1.1 ms append, more than the insert's execution.  A function keeps its
statements' plans per connection.  Client-side prepared statements would too, but Django's
cursors do not prepare (they break behind transaction-mode poolers), and the lock and the
insert could not be one of them; one function call is one round trip, one implicit
transaction in autocommit, and works behind any pooler.  The function takes the session's
advisory lock, then runs :data:`appends.INSERT`, which takes its snapshot after the lock
was granted (each statement of a volatile function takes a new one), so it sees every
earlier append.  It counts its row on the session's registry row and sets the registry's
``updated_at`` stamp there when SessionManager passes one (:func:`body`).

The body is generated here from :mod:`~agent_sessions.storage.appends`; a test holds the
function a fresh ``migrate`` installs equal to it, so a change of the append's SQL needs a
new migration that installs the new body, written out in it.
"""

from __future__ import annotations

from .. import triggers
from . import appends
from .postgres_plans import PLANNER_SETTINGS, PRELUDE, named, return_query

NAME = "agent_sessions_append"

LOCK = "pg_advisory_xact_lock(hashtextextended({key}, 0))"
"""The session's write lock, on the key ``storage.postgres.lock_key`` gives: the one expression the
function and the client's statements (storage/postgres.py) take it with, so they always meet."""

# (name, type) of the function's arguments, in the order :func:`call_params` gives them.  The
# last, the registry's stamp, defaults to null, so a call without it (from code that predates
# it) still resolves; older releases installed the function without it (``stamps=False``).
_ARGS = (
    ("p_lock_key", "text"),
    ("p_id", "text"),
    ("p_session_id", "text"),
    ("p_role", "text"),
    ("p_content", "text"),
    ("p_text", "text"),
    ("p_tool", "text"),
    ("p_created_at", "timestamptz"),
    ("p_tokens", "integer"),
    ("p_parent", "text"),
    ("p_auto", "boolean"),
    ("p_stamp", "timestamptz"),
)
_ROW = [name for name, _ in _ARGS[1:9]]  # the eight row values appends.params() takes


def _args(*, stamps: bool) -> tuple[tuple[str, str], ...]:
    return _ARGS if stamps else _ARGS[:-1]


def _signature(*, stamps: bool) -> str:
    return f"{NAME}({', '.join(kind for _, kind in _args(stamps=stamps))})"


def _call(*, stamps: bool) -> str:
    return f"SELECT seq, parent_id, depth, path_tokens FROM {NAME}({', '.join(['%s'] * len(_args(stamps=stamps)))})"


SIGNATURE = _signature(stamps=True)
UNSTAMPED_SIGNATURE = _signature(stamps=False)
"""The function's signature without the stamp argument, as a database not yet migrated to it has it."""
CALL = _call(stamps=True)
UNSTAMPED_CALL = _call(stamps=False)
"""A call of :data:`UNSTAMPED_SIGNATURE`; parameters: :func:`call_params` but the last."""


def _insert(parent: str | None, *, auto: bool, dynamic: bool, partitioned: bool = False) -> str:
    """The append's statement as the function runs it: a static ``RETURN QUERY`` (its plan kept)
    naming the arguments where :func:`appends.params` puts them, or a dynamic one (planned at
    each call with the values, as a statement sent by a client is) with ``$n`` placeholders and
    a ``USING`` list; ``partitioned``: with the children probe that prunes partitions."""
    names = appends.params(_ROW, "p_session_id", parent, auto=auto, partitioned=partitioned)
    return return_query(appends.statement(parent, auto=auto, partitioned=partitioned), names, dynamic=dynamic)


def _branches(*, dynamic: bool, partitioned: bool = False) -> str:
    def insert(parent: str | None, auto: bool) -> str:
        return _insert(parent, auto=auto, dynamic=dynamic, partitioned=partitioned)

    return (
        "    IF p_auto THEN\n"
        f"      {insert(None, True)};\n"
        "    ELSIF p_parent IS NULL THEN\n"
        f"      {insert(None, False)};\n"
        "    ELSE\n"
        f"      {insert('p_parent', False)};\n"
        "    END IF;\n"
    )


def _stamp() -> str:
    """:data:`appends.STAMP` as the function runs it, for an id that was already stored (see :func:`body`)."""
    return named(appends.STAMP, appends.stamp_params("p_stamp", "p_session_id", "p_id"))


def body(*, stamps: bool = True) -> str:
    """The function's PL/pgSQL source (what ``pg_proc.prosrc`` holds once installed); ``stamps=False``:
    without the registry's stamp (``p_stamp``), the version older releases installed, which a database
    not yet migrated may still have (tests install it to hold the code working with it).

    With a stamp, the count's own update of the registry row sets ``updated_at`` to it; an id
    already stored (a repeated append) is stamped all the same, as :data:`appends.STAMP` does
    after the call for code that predates the argument; an id refused is not.
    """
    if not stamps:
        count = f"  IF FOUND THEN\n    {triggers.count_one_sql('p_session_id')};\n  END IF;\n"
    else:
        count = (
            f"  IF FOUND THEN\n    {triggers.count_one_sql('p_session_id', stamp='p_stamp')};\n"
            f"  ELSIF p_stamp IS NOT NULL THEN\n    {_stamp()};\n  END IF;\n"
        )
    return (
        PRELUDE + f"  PERFORM {LOCK.format(key='p_lock_key')};\n"
        "  IF mode = 'kept' THEN\n"
        + _branches(dynamic=False)
        + "  ELSIF mode = 'partitioned kept' THEN\n"
        + _branches(dynamic=False, partitioned=True)
        + "  ELSIF mode = 'partitioned' THEN\n"
        + _branches(dynamic=True, partitioned=True)
        + "  ELSE\n"
        + _branches(dynamic=True)
        + "  END IF;\n"
        + count
        + "END\n"
    )


# The function counts the row it inserted (``IF FOUND``: a duplicate or a refused id inserts
# nothing) and sets :data:`triggers.COUNTED_BY_APPEND` for its call, which the insert
# trigger's WHEN clause reads: the same update, without the trigger's machinery.
COUNTING = f"SET {triggers.COUNTED_BY_APPEND} = on"


def install_sql(*, stamps: bool = True) -> list[str]:
    """Create (or replace) the function (``stamps``: see :func:`body`), dropping the other signature
    first: with both installed, a call without the stamp would be ambiguous."""
    args = ", ".join(f"{name} {kind}" for name, kind in _args(stamps=stamps))
    if stamps:
        args += " DEFAULT NULL"
    other = UNSTAMPED_SIGNATURE if stamps else SIGNATURE
    return [
        f"DROP FUNCTION IF EXISTS {other}",
        f"CREATE OR REPLACE FUNCTION {NAME}({args}) "
        "RETURNS TABLE (seq bigint, parent_id text, depth integer, path_tokens bigint) "
        f"LANGUAGE plpgsql VOLATILE {PLANNER_SETTINGS} {COUNTING} "
        f"AS $agent_sessions_append${body(stamps=stamps)}$agent_sessions_append$",
    ]


def call_params(lock_key: str, values: list, parent: str | None, *, auto: bool, stamp: object = None) -> list:
    """The arguments of :data:`CALL`: the lock key, the row's eight values (see :func:`appends.params`),
    the parent, and the registry's ``stamp`` (None: none)."""
    return [lock_key, *values, parent, auto, stamp]
