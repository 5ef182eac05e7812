"""SQLite-specific SQL: FTS5 searches, byte sizes, locking, bulk writes that index after their rows.

The schema (tables, FTS5 indexes, their triggers) is the initial migration's, written out in
``migrations/_frozen_sql.py``.

Appends on SQLite need no explicit lock: the insert picks its parent inside the
same statement, and a writing statement holds the database's write lock from
its first read, so two writers can never pick the same parent.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from itertools import islice
from typing import TypeVar

from django.db import transaction

from ..search import fts5, plan
from ..search.run import Searcher
from . import appends, bare_reads, pops, walks
from .range_reads import NO_CALLS, ReadCalls

vendor = "sqlite"

T = TypeVar("T")

BYTES_EXPR = "length(CAST({col} AS BLOB))"

# A fresh uuid4 as 32 hex digits (what ``uuid.uuid4().hex`` gives: version 4, variant 10xx), minted in
# SQL for bulk copies, once per row: two random() calls, one per 16 digits, the version digit (the
# 13th) masked in and the variant's top bits set (``1 << 63`` is the sign bit, which printf's %llx
# prints as the top hex digit).  Four calls with the digits placed by printf cost 3 ms more of a
# 10,000-row fork; shaping one randomblob's hex with substr and instr, 35 ms more.  The percent
# signs are doubled: the expression only ever runs inside a statement with parameters.
RANDOM_HEX_EXPR = (
    "printf('%%016llx%%016llx', (random() & -61441) | 16384, (random() & 4611686018427387903) | (1 << 63))"
)
# ``{col}`` (text) as a JSON string literal, escaped as Python's ``json.dumps`` escapes it.
JSON_QUOTE_EXPR = "json_quote({col})"


@functools.lru_cache(maxsize=256)
def _qmark(sql: str) -> str:
    """Django's ``%s`` placeholders as sqlite3's ``?`` (``%%`` as ``%``), converted once per statement text."""
    return re.sub(r"(?<!%)%s", "?", sql).replace("%%", "%")


def fetch(connection, sql: str, params: list, *, one: bool = False) -> list[tuple]:
    """Run a read on the bare sqlite3 connection, its placeholders converted once per statement
    (Django's cursor converts the whole text again on every call, a visible share of a short read)."""
    return bare_reads.fetch(
        connection, sql, params, lambda raw, text, values: raw.execute(_qmark(text), values), one=one
    )


def inserted_rows(cursor) -> int:
    """How many rows the cursor's last statement inserted (its ``rowcount`` is -1 after a
    ``WITH … INSERT`` in Python's sqlite3)."""
    cursor.execute("SELECT changes()")
    return cursor.fetchone()[0]


def retry_if_functions_gone(connection, run: Callable[[], T]) -> T:
    """``run()``: SQLite has no stored functions to go missing (see postgres.py)."""
    return run()


def read_calls(connection) -> ReadCalls:
    """SQLite has no stored functions: ``get_history`` reads the leaf, then the range;
    ``get_recent_history`` sends its statement, and a window's first read reads on (in-process, cheap)."""
    return NO_CALLS


def lock_session(cursor, session_id: str) -> None:
    """Nothing to do: SQLite serialises writers (see the module docstring)."""


def locked_insert(
    cursor, session_id: str, values: list, parent: str | None, *, auto: bool, stamp: object = None
) -> tuple | None:
    """Run the append's ``INSERT … RETURNING`` (storage/appends.py) as one statement, with no explicit transaction.

    The lone statement is atomic and takes the write lock before it reads the
    parent.  A deferred ``BEGIN`` would let two writers both take a read lock and
    then deadlock on the upgrade (SQLite then fails at once instead of waiting).
    With a registry ``stamp`` (:data:`appends.STAMP`) the two statements share one
    transaction, whose first statement takes the write lock.
    """
    insert = appends.statement(parent, auto=auto), appends.params(values, session_id, parent, auto=auto)
    if stamp is None:
        cursor.execute(*insert)
        return cursor.fetchone()
    with transaction.atomic(using=cursor.db.alias):
        reserve_write(cursor)
        cursor.execute(*insert)
        row = cursor.fetchone()
        cursor.execute(appends.STAMP, appends.stamp_params(stamp, session_id, values[0]))
    return row


def pop_latest(cursor, session_id: str, stamp: object) -> tuple | None:
    """Delete the session's latest leaf and stamp the registry row, in one transaction that takes the
    write lock first (storage/pops.py); ``(content,)`` of the row removed, or None for an empty session."""
    with transaction.atomic(using=cursor.db.alias):
        reserve_write(cursor)
        # The whole lookup at once: SQLite plans it for nothing and stops at the first arm's row.
        cursor.execute(walks.LATEST_LEAF_SEQ_CONTENT, walks.latest_leaf_params(session_id))
        leaf = cursor.fetchone()
        if leaf is None:
            return None
        cursor.execute(pops.DELETE_ROW, [session_id, leaf[0]])
        cursor.execute(appends.TOUCH, [stamp, session_id])
    return (leaf[1],)


_searcher = Searcher(fts5.compile_query)
search_messages = _searcher.search_messages
search_entries = _searcher.search_entries
ranked_messages = _searcher.ranked_messages
match_keys = _searcher.match_keys
match_sql = _searcher.match_sql
search_summaries = _searcher.search_summaries


def estimated_rows(cursor, sql: str, params: list | tuple) -> int | None:
    """None: SQLite's planner keeps no row estimates, so a count stays exact (FTS5 counts are cheap)."""
    return None


def insert_many(cursor, table: str, columns: tuple[str, ...], param_rows: Iterable[list], per_statement: int) -> None:
    """Bulk insert as multi-row ``INSERT … VALUES (…), (…)`` statements (faster than executemany here)."""
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
    row_sql = "(" + ", ".join(["%s"] * len(columns)) + ")"
    rows = iter(param_rows)
    while chunk := list(islice(rows, per_statement)):
        cursor.execute(head + ", ".join([row_sql] * len(chunk)), [v for row in chunk for v in row])


def in_list(values: list[str]) -> tuple[str, object]:
    """``column <this>`` tests membership in ``values``, bound as one JSON array parameter."""
    return "IN (SELECT value FROM json_each(%s))", json.dumps(values)


def reserve_write(cursor) -> None:
    """Take the write lock first thing in a transaction (what ``BEGIN IMMEDIATE`` does).

    A deferred transaction whose first statement touches an FTS5 table opens a
    read transaction while connecting the virtual table; upgrading that to a
    write fails at once with "database is locked" instead of waiting out the
    busy timeout.  A write that changes nothing, issued first, waits like any other.
    """
    cursor.execute("UPDATE assistant_sessions SET id = id WHERE 1 = 0")


# Django's text format for datetimes, to the millisecond (the best SQLite's clock gives).
_NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now')"
# The later of the stored stamp and the clock, as the message-count triggers set ``updated_at``
# (the deferred fill below does the same), so it never moves back (the registry stamps it to the
# microsecond with its own clock, manager/clock.py).  Both are text in Django's format,
# "YYYY-MM-DD HH:MM:SS[.fff…]", which sorts as the time does: a millisecond stamp that is a
# prefix of a microsecond one sorts first, as its truncation should.
_LATER = f"max(updated_at, {_NOW})"


def _indexed(columns: tuple[str, ...], values: dict, prefix: str) -> str:
    """What an FTS index holds for ``columns``, as its triggers index them: the column, or its ``values``
    expression (``{row}``: the row prefix)."""
    return ", ".join(values.get(c, "{row}" + c).format(row=prefix) for c in columns)


# The trigram index serves only substring terms, which are in scripts written without
# spaces (never ASCII): a column value that is all ASCII can never match one.  Trigram-indexing
# every 3-character window of such values is most of an append's cost (10,000 English rows:
# 805 ms of FTS work with the full index, 297 ms without), so the trigram index reads messages
# through a view that blanks all-ASCII values (as many characters as bytes: an O(1) blob length
# against a character count, far cheaper than a character class).  It blanks the tool text and
# the text, as Postgres' partial index leaves all-ASCII text out; the deferred fill below indexes
# the same expressions as the view and its triggers.
_NON_ASCII_ONLY = "CASE WHEN length(CAST({{row}}{col} AS BLOB)) = length({{row}}{col}) THEN '' ELSE {{row}}{col} END"


def _trigram_values() -> dict[str, str]:
    """What the trigram index indexes in place of each message column: blank when all-ASCII."""
    m = plan.MESSAGES
    return {c: _NON_ASCII_ONLY.format(col=c) for c in (m.text, m.extra)}


def server_closed(raw) -> bool:
    """SQLite has no server to lose."""
    return False


# ── bulk writes index once, after the rows ───────────────────────────────
# FTS5 fed row by row from a trigger costs more than one INSERT … SELECT over the same rows
# once they are in (10,000 rows in a bare table: 160–250 ms of trigger work against 24–60 ms;
# in the library's own writes, about 13 % of append_all's CPU time and 8 % of a fork's).  A
# bulk write names its session in this table for the length of its own transaction: the insert
# triggers (both FTS indexes and the message count) skip that session's rows, and the write
# then indexes and counts them in one statement each.  SQLite has one writer at a time and
# the row is deleted before the commit, so no other connection ever sees it: a foreign
# writer's rows are indexed by the triggers, row by row.
DEFERRED_INDEX = "agent_sessions_deferred_index"
DEFER_AT = 32
"""Bulk writes of at least this many rows index after the rows (below it the extra statements cost more)."""


def _message_indexes() -> list[tuple[str, tuple[str, ...], dict]]:
    """``(fts table, columns, values)`` of the two message indexes: text and tool text, the trigram index
    without all-ASCII values."""
    m = plan.MESSAGES
    columns = (m.text, m.extra)
    return [(m.fts, columns, {}), (m.trigram, columns, _trigram_values())]


# The rows a deferred write added: its session's, past the largest seq when it began (seq is
# AUTOINCREMENT, so every later row of the table lies above it).
_AFTER_START = (
    f"FROM {plan.MESSAGES.table} WHERE session_id = %s "
    f"AND seq > (SELECT after_seq FROM {DEFERRED_INDEX} WHERE session_id = %s)"
)
_DEFERRED_FILL = [
    *(
        f"INSERT INTO {fts}(rowid, {', '.join(columns)}) SELECT seq, {_indexed(columns, values, '')} {_AFTER_START}"
        for fts, columns, values in _message_indexes()
    ),
    f"UPDATE assistant_sessions SET message_count = message_count + (SELECT count(*) {_AFTER_START}), "
    f"updated_at = {_LATER.replace('%', '%%')} WHERE id = %s AND EXISTS (SELECT 1 {_AFTER_START})",
]


@contextmanager
def deferred_indexing(cursor, session_id: str, rows: int | None) -> Iterator[None]:
    """Run a bulk insert of ``rows`` rows (None: unknown) into this session with its indexing after it.

    The marker, the rows and the indexing share one transaction (a savepoint of its own when
    the caller has none), so an error rolls the marker back with the rows and none outlives
    its write.
    """
    if rows is not None and rows < DEFER_AT:
        yield
        return
    with nullcontext() if cursor.db.in_atomic_block else transaction.atomic(using=cursor.db.alias):
        cursor.execute(
            f"INSERT INTO {DEFERRED_INDEX} (session_id, after_seq) "
            f"SELECT %s, coalesce(max(seq), 0) FROM {plan.MESSAGES.table}",
            [session_id],
        )
        yield
        twice = [session_id, session_id]
        for statement in _DEFERRED_FILL[:-1]:
            cursor.execute(statement, twice)
        cursor.execute(_DEFERRED_FILL[-1], [*twice, session_id, *twice])
        cursor.execute(f"DELETE FROM {DEFERRED_INDEX} WHERE session_id = %s", [session_id])


def _accepts(sql: str) -> bool:
    """Whether a scratch in-memory SQLite database runs ``sql`` without an OperationalError."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute(sql)
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()


def has_fts5() -> bool:
    """Whether the SQLite library Python links against was built with FTS5."""
    return _accepts("CREATE VIRTUAL TABLE fts5_probe USING fts5(x)")


def has_trigram() -> bool:
    """Whether that library's FTS5 has the ``trigram`` tokenizer (3.34+); call after :func:`has_fts5`."""
    return _accepts("CREATE VIRTUAL TABLE trigram_probe USING fts5(x, tokenize='trigram')")
