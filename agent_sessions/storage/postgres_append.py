"""Postgres: the append as a PL/pgSQL function, ``agent_sessions_append`` (migration 0018).

A statement sent by a client is parsed and planned on every append; planning alone was
0.26 ms of a 1.1 ms append, more than the insert's execution.  A function keeps its
statements' plans per connection.  Client-side prepared statements would too, but Django's
cursors do not prepare (they break behind transaction-mode poolers), and the lock and the
insert could not be one of them; one function call is one round trip, one implicit
transaction in autocommit, and works behind any pooler.  The function takes the session's
advisory lock, then runs :data:`appends.INSERT`, which takes its snapshot after the lock
was granted (each statement of a volatile function takes a new one), so it sees every
earlier append.  It counts its row on the session's registry row (migration 0021) and sets
the registry's ``updated_at`` stamp there when SessionManager passes one (0024, :func:`body`).

The body is generated here from :mod:`~agent_sessions.storage.appends`; a test holds the
installed function equal to it, so a change of the append's SQL needs a migration that
calls :func:`install_sql` again.
"""

from __future__ import annotations

from .. import triggers
from . import appends

NAME = "agent_sessions_append"

LOCK = "pg_advisory_xact_lock(hashtextextended({key}, 0))"
"""The session's write lock, on the key ``storage.postgres.lock_key`` gives: the one expression the
function and the client's statements (storage/postgres.py) take it with, so they always meet."""

# (name, type) of the function's arguments, in the order :func:`call_params` gives them.  The
# last, the registry's stamp, came with migration 0024 (it defaults to null, so a call without it,
# from code that predates it, still resolves); migrations 0018-0023 install the function without it.
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
"""The function as migrations 0018-0023 installed it: no stamp argument."""
CALL = _call(stamps=True)
UNSTAMPED_CALL = _call(stamps=False)
"""A call of :data:`UNSTAMPED_SIGNATURE`; parameters: :func:`call_params` but the last."""


def _insert(parent: str | None, *, auto: bool, dynamic: bool, partitioned: bool = False) -> str:
    """The append's statement as the function runs it: a static ``RETURN QUERY`` (its plan kept)
    naming the arguments where :func:`appends.params` puts them, or a dynamic one (planned at
    each call with the values, as a statement sent by a client is) with ``$n`` placeholders and
    a ``USING`` list; ``partitioned``: with the children probe that prunes partitions."""
    names = appends.params(_ROW, "p_session_id", parent, auto=auto, partitioned=partitioned)
    sql = appends.statement(parent, auto=auto, partitioned=partitioned)
    if not dynamic:
        return "RETURN QUERY " + _named(sql, names)
    numbered = _named(sql, [f"${n}" for n in range(1, len(names) + 1)])
    return f"RETURN QUERY EXECUTE $sql${numbered}$sql$ USING {', '.join(names)}"


def _named(sql: str, names: list[str]) -> str:
    """``sql`` with its ``%s`` placeholders replaced, in order, by ``names`` (argument names or ``$n``)."""
    pieces = sql.split("%s")
    assert len(pieces) == len(names) + 1, "a statement and its parameters disagree"
    return "".join(p + n for p, n in zip(pieces, names, strict=False)) + pieces[-1]


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


# A kept plan is built once per connection from what the planner knows then, and kept until
# ANALYZE or DDL invalidates it.  Built while the table is tiny, every index looks alike (each
# estimate is one row) and the children probes took the primary key, reading the whole
# session: an append went from 0.8 ms at the start of 2,000 to 2.7 ms at the end.  So plans
# are kept only once the planner can tell the indexes apart: ANALYZE counted at least
# ``KEEP_PLANS_FROM_ROWS`` rows, or, never analysed, the table holds ``KEEP_PLANS_FROM_BYTES``
# (the planner then estimates from its size); a hash-partitioned table (manage.py
# partition_tables) counts its partitions together.  Until then each call plans its statement
# with the values.  On a partitioned table the statement names the session and the id in the
# children probe (``partitioned``), which lets even a kept plan skip all partitions but the
# session's when it starts (15 of 16 pruned per call); planned per call, the 16 partitions
# cost 6 ms of planning an append, three times the append itself.
KEEP_PLANS_FROM_ROWS = 1000
KEEP_PLANS_FROM_BYTES = 1024 * 1024


def _known(table: str) -> str:
    """How much of the thresholds the pg_class row ``table`` holds (1 or more keeps plans)."""
    return (
        f"CASE WHEN {table}.reltuples >= 0 THEN {table}.reltuples::float8 / {KEEP_PLANS_FROM_ROWS} "
        f"ELSE pg_catalog.pg_relation_size({table}.oid)::float8 / {KEEP_PLANS_FROM_BYTES} END"
    )


MODE = (
    "(SELECT CASE WHEN c.relkind = 'p' THEN CASE WHEN ("
    f"SELECT sum({_known('k')}) FROM pg_catalog.pg_inherits i "
    "JOIN pg_catalog.pg_class k ON k.oid = i.inhrelid WHERE i.inhparent = c.oid"
    ") >= 1 THEN 'partitioned kept' ELSE 'partitioned' END "
    f"WHEN {_known('c')} >= 1 THEN 'kept' "
    "ELSE 'planned' END FROM pg_catalog.pg_class c WHERE c.oid = 'assistant_messages'::regclass)"
)


# Deciding the mode is a catalog query (and, on a table never analysed, a look at its file's
# size): 27-45 us of a 0.5 ms call, 5-9 % of the server's time in an append, spent to find out
# what seldom changes.  A connection that found plans kept remembers it in the setting
# ``MODE_SETTING``, stamped with the table it was found for (its oid and file number), and asks
# again only when the stamp no longer matches: a table partitioned or rebuilt (new oid) or
# truncated (new file).  "Planned" is never remembered, so a growing table reaches "kept" at
# once.  The setting belongs to the connection (a rolled-back transaction takes it back; a
# pooler's DISCARD ALL clears it).  Left unseen: a table emptied by DELETE, or the partitions of
# a partitioned one truncated, keeps "kept" on that connection; its plans are rebuilt at each
# ANALYZE all the same, and with few rows every plan is cheap.
MODE_SETTING = "agent_sessions.append_mode"
STAMP = (
    "(('assistant_messages'::regclass)::oid::text || '/' || "
    "coalesce(pg_catalog.pg_relation_filenode('assistant_messages'::regclass), 0)::text)"
)
"""Which table the mode was found for (an SQL expression): its oid and the number of its file."""


def _stamp() -> str:
    """:data:`appends.STAMP` as the function runs it, for an id that was already stored (see :func:`body`)."""
    return _named(appends.STAMP, appends.stamp_params("p_stamp", "p_session_id", "p_id"))


def body(*, counts: bool = True, stamps: bool = True) -> str:
    """The function's PL/pgSQL source (what ``pg_proc.prosrc`` holds once installed); ``counts=False``:
    as migrations 0018-0020 installed it, leaving the count to the insert trigger; ``stamps=False``:
    as 0018-0023 did, without the registry's stamp (``p_stamp``).

    With a stamp, the count's own update of the registry row sets ``updated_at`` to it; an id
    already stored (a repeated append) is stamped all the same, as :data:`appends.STAMP` does
    after the call for code that predates the argument; an id refused is not.
    """
    assert counts or not stamps, "the stamp rides on the function's own count"
    if not counts:
        count = ""
    elif not stamps:
        count = f"  IF FOUND THEN\n    {triggers.count_one_sql('p_session_id')};\n  END IF;\n"
    else:
        count = (
            f"  IF FOUND THEN\n    {triggers.count_one_sql('p_session_id', stamp='p_stamp')};\n"
            f"  ELSIF p_stamp IS NOT NULL THEN\n    {_stamp()};\n  END IF;\n"
        )
    return (
        "\n#variable_conflict use_column\n"
        f"DECLARE\n  stamp text := {STAMP};\n  mode text := current_setting('{MODE_SETTING}', true);\n"
        "BEGIN\n"
        "  IF mode LIKE stamp || ' %' THEN\n"
        "    mode := substr(mode, length(stamp) + 2);\n"
        "  ELSE\n"
        f"    mode := {MODE};\n"
        "    IF mode LIKE '%kept' THEN\n"
        f"      PERFORM set_config('{MODE_SETTING}', stamp || ' ' || mode, false);\n"
        "    END IF;\n"
        "  END IF;\n"
        f"  PERFORM {LOCK.format(key='p_lock_key')};\n"
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


# How the function plans.  Its kept plans are generic (the same for every session): left to
# choose, Postgres went on planning each call whenever a generic estimate looked dearer than
# the value-specific ones, as after ANALYZE in a table one session fills (1.14 ms an append
# against 0.80 ms with the generic plan).  A generic plan cannot know how large the session
# is, and estimated it at eight rows in a table of 1,500 live rows and 40-75 MB of dead ones:
# it found the newest rows by a bitmap scan of the whole session and a sort, and then, with
# sorts priced out, through the children index and an incremental sort (2,028 rows read for
# 8, buffers 71 -> 537).  Every statement here has index paths that stay O(1) per append at
# any size (the primary key in order, the children index, the unique key), so sequential and
# bitmap scans and both kinds of sort are priced out (not forbidden: the sort of the newest
# eight rows still runs).  Pricing out adds a huge constant to a plan's cost, which had
# Postgres compile every append with JIT (170 ms each): JIT is off here.
PLANNER_SETTINGS = (
    "SET plan_cache_mode = force_generic_plan SET jit = off SET enable_seqscan = off "
    "SET enable_bitmapscan = off SET enable_sort = off SET enable_incremental_sort = off"
)


# The function counts the row it inserted (``IF FOUND``: a duplicate or a refused id inserts
# nothing) and sets :data:`triggers.COUNTED_BY_APPEND` for its call, which the insert
# trigger's WHEN clause reads: the same update, without the trigger's machinery.
COUNTING = f"SET {triggers.COUNTED_BY_APPEND} = on"


def install_sql(*, counts: bool = True, stamps: bool = True) -> list[str]:
    """Create (or replace) the function (``counts``, ``stamps``: see :func:`body`), dropping the
    other signature first: with both installed, a call without the stamp would be ambiguous."""
    args = ", ".join(f"{name} {kind}" for name, kind in _args(stamps=stamps))
    if stamps:
        args += " DEFAULT NULL"
    settings = f"{PLANNER_SETTINGS} {COUNTING}" if counts else PLANNER_SETTINGS
    other = UNSTAMPED_SIGNATURE if stamps else SIGNATURE
    return [
        f"DROP FUNCTION IF EXISTS {other}",
        f"CREATE OR REPLACE FUNCTION {NAME}({args}) "
        "RETURNS TABLE (seq bigint, parent_id text, depth integer, path_tokens bigint) "
        f"LANGUAGE plpgsql VOLATILE {settings} "
        f"AS $agent_sessions_append${body(counts=counts, stamps=stamps)}$agent_sessions_append$",
    ]


UNINSTALL = [f"DROP FUNCTION IF EXISTS {SIGNATURE}", f"DROP FUNCTION IF EXISTS {UNSTAMPED_SIGNATURE}"]


def reinstall(apps, schema_editor) -> None:
    """A migration's step (``RunPython``) that installs the function again from this code, on Postgres:
    for each change of the append's SQL (from 0024 on; the signature stays)."""
    _install(schema_editor, counts=True, stamps=True)


def reinstall_unstamped(apps, schema_editor) -> None:
    """:func:`reinstall` as migrations 0021-0023 (and 0024's reverse) install it: no stamp argument."""
    _install(schema_editor, counts=True, stamps=False)


def reinstall_uncounted(apps, schema_editor) -> None:
    """:func:`reinstall` as migrations 0018-0020 (and 0021's reverse) install it: the insert trigger
    counts its rows, so a database stopped at any of them counts each row once."""
    _install(schema_editor, counts=False, stamps=False)


def uninstall(apps, schema_editor) -> None:
    """Migration 0018's reverse: drop the function (Postgres)."""
    _run(schema_editor, UNINSTALL)


def _install(schema_editor, *, counts: bool, stamps: bool) -> None:
    _run(schema_editor, install_sql(counts=counts, stamps=stamps))


def _run(schema_editor, statements: list[str]) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in statements:
            schema_editor.execute(statement, params=None)


def call_params(lock_key: str, values: list, parent: str | None, *, auto: bool, stamp: object = None) -> list:
    """The arguments of :data:`CALL`: the lock key, the row's eight values (see :func:`appends.params`),
    the parent, and the registry's ``stamp`` (None: none)."""
    return [lock_key, *values, parent, auto, stamp]
