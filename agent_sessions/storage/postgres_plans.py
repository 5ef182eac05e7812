"""Postgres: how the PL/pgSQL functions keep their statements' plans (shared by the append and
the range reads).

A function keeps the plans of its static statements per connection, which a statement sent by
a client never has: it is planned at every call.  Whether a kept plan is safe depends on what
the planner knew when it built it, so each function first finds the table's mode
(:data:`PRELUDE`), then runs its statements either static (``RETURN QUERY``, the plan kept) or
dynamic (``RETURN QUERY EXECUTE``, planned with the values, as a client's statement is).
"""

from __future__ import annotations

# A kept plan is built once per connection from what the planner knows then, and kept until
# ANALYZE or DDL invalidates it.  Built while the table is tiny, every index looks alike (each
# estimate is one row) and the children probes take the primary key, reading the whole
# session, so an append grows with its session (docs/performance.md, G5).  So plans
# are kept only once the planner can tell the indexes apart: ANALYZE counted at least
# ``KEEP_PLANS_FROM_ROWS`` rows, or, never analysed, the table holds ``KEEP_PLANS_FROM_BYTES``
# (the planner then estimates from its size); a hash-partitioned table (manage.py
# partition_tables) counts its partitions together.  Until then each call plans its statement
# with the values.  On a partitioned table the statement names the session and the id in the
# children probe (``partitioned``), which lets even a kept plan skip all partitions but the
# session's when it starts (15 of 16 pruned per call); planned per call, the partitions
# cost more planning than the append itself (docs/performance.md, A3).
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
# size), spent at every call to find out what seldom changes (docs/performance.md, A6).  A
# connection that found plans kept remembers it in the setting ``MODE_SETTING``, stamped with
# the table it was found for (its oid and file number), and asks again only when the stamp no
# longer matches: a table partitioned or rebuilt (new oid) or truncated (new file).  "Planned"
# is never remembered, so a growing table reaches "kept" at once.  The setting belongs to the
# connection (a rolled-back transaction takes it back; a pooler's DISCARD ALL clears it).  Left
# unseen: a table emptied by DELETE, or the partitions of a partitioned one truncated, keeps
# "kept" on that connection; its plans are rebuilt at each ANALYZE all the same, and with few
# rows every plan is cheap.
MODE_SETTING = "agent_sessions.append_mode"
STAMP = (
    "(('assistant_messages'::regclass)::oid::text || '/' || "
    "coalesce(pg_catalog.pg_relation_filenode('assistant_messages'::regclass), 0)::text)"
)
"""Which table the mode was found for (an SQL expression): its oid and the number of its file."""


# How the functions plan.  Their kept plans are generic (the same for every session): left to
# choose, Postgres goes on planning each call whenever a generic estimate looks dearer than
# the value-specific ones, as after ANALYZE in a table one session fills (docs/performance.md,
# G6).  A generic plan cannot know how large the session
# is: estimating it at eight rows in a table of 1,500 live rows and 40-75 MB of dead ones, it
# finds the newest rows by a bitmap scan of the whole session and a sort, or, with only sorts
# priced out, through the children index and an incremental sort (2,028 rows read for 8).
# Every statement in them has index paths that stay O(1) per append at any size (the primary
# key in order, the children index, the unique key), so sequential and bitmap scans and both
# kinds of sort are priced out (not forbidden: the sort of the newest eight rows still runs).
# Pricing out adds a huge constant to a plan's cost, which would have Postgres compile every
# append with JIT (docs/performance.md, G7): JIT is off here.
PLANNER_SETTINGS = (
    "SET plan_cache_mode = force_generic_plan SET jit = off SET enable_seqscan = off "
    "SET enable_bitmapscan = off SET enable_sort = off SET enable_incremental_sort = off"
)


PRELUDE = (
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
)
"""A function body's start: its declarations, and the PL/pgSQL variable ``mode`` set to the table's
mode (:data:`MODE`'s values), remembered per connection as said above."""


def return_query(sql: str, names: list[str], *, dynamic: bool) -> str:
    """``sql`` (``%s`` placeholders) as a function returns its rows: static, naming the arguments
    ``names`` (its plan kept), or dynamic, with ``$n`` placeholders and a ``USING`` list (planned
    at each call with the values)."""
    return "RETURN QUERY " + _query(sql, names, dynamic=dynamic)


def loop_over(record: str, sql: str, names: list[str], body: str, *, dynamic: bool) -> str:
    """A ``FOR`` loop running ``body`` on each row of ``sql`` (in ``record``), static or dynamic as
    in :func:`return_query`; ``body`` may leave early with ``EXIT``, and the scan stops there."""
    return f"FOR {record} IN {_query(sql, names, dynamic=dynamic)} LOOP\n{body}\nEND LOOP;\n"


def _query(sql: str, names: list[str], *, dynamic: bool) -> str:
    if not dynamic:
        return named(sql, names)
    numbered = named(sql, [f"${n}" for n in range(1, len(names) + 1)])
    return f"EXECUTE $sql${numbered}$sql$ USING {', '.join(names)}"


def named(sql: str, names: list[str]) -> str:
    """``sql`` with its ``%s`` placeholders replaced, in order, by ``names`` (argument names or ``$n``)."""
    pieces = sql.split("%s")
    assert len(pieces) == len(names) + 1, "a statement and its parameters disagree"
    return "".join(p + n for p, n in zip(pieces, names, strict=False)) + pieces[-1]
