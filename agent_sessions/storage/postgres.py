"""Postgres-specific SQL: advisory locks, the calls of the append and read functions, searches over
the tsvector columns, byte sizes, and the state checks W015 and E022 read.

The schema itself (tables, search columns and indexes, functions, triggers) is the initial
migration's, written out in ``migrations/_frozen_sql.py``.
"""

from __future__ import annotations

import enum
import json
import select
import weakref
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any, TypeVar

from django.db import ProgrammingError, connections, transaction

from .. import conf
from ..search import tsquery
from ..search.plan import SUMMARIES
from ..search.run import Searcher
from . import appends, bare_reads, pops, postgres_append, postgres_reads
from .range_reads import ReadCalls

vendor = "postgresql"

T = TypeVar("T")

BYTES_EXPR = "octet_length({col})"

# A fresh uuid4 as 32 hex digits (what ``uuid.uuid4().hex`` gives), minted in SQL for bulk copies.
RANDOM_HEX_EXPR = "replace(gen_random_uuid()::text, '-', '')"
# ``{col}`` (text) as a JSON string literal, escaped as Python's ``json.dumps`` escapes it.
JSON_QUOTE_EXPR = "to_json({col})::text"


def fetch(connection, sql: str, params: list, *, one: bool = False) -> list[tuple]:
    """Run a read on the bare psycopg connection with server-side binding: the parameters travel
    apart from the query text, so neither psycopg (quoting each value into the text, as Django's
    client-side cursor does) nor Postgres (parsing those literals) handles them as SQL text.
    Preparing stays as Django configured it (``prepare_threshold``, off unless set)."""
    return bare_reads.fetch(connection, sql, params, _execute, one=one)


def _execute(raw, sql: str, params: list):
    cursor = raw.cursor()
    cursor.execute(sql, params)
    return cursor


def inserted_rows(cursor) -> int:
    """How many rows the cursor's last statement inserted."""
    return cursor.rowcount


def lock_session(cursor, session_id: str) -> None:
    """Serialise writers of one session until the transaction ends (advisory lock)."""
    cursor.execute(LOCK, [lock_key(session_id)])


LOCK = "SELECT " + postgres_append.LOCK.format(key="%s")
"""The session's write lock as a statement; parameter: :func:`lock_key`."""


def lock_key(session_id: str) -> str:
    return "agent_sessions:" + session_id


def locked_insert(
    cursor, session_id: str, values: list, parent: str | None, *, auto: bool, stamp: object = None
) -> tuple | None:
    """:func:`_locked_insert`, once more if the append function this connection remembered is gone
    (:func:`retry_if_functions_gone`)."""
    return retry_if_functions_gone(
        cursor.db, lambda: _locked_insert(cursor, session_id, values, parent, auto=auto, stamp=stamp)
    )


def retry_if_functions_gone(connection, run: Callable[[], T]) -> T:
    """``run()``; when it fails because a function of this library is gone (its migrations were
    taken back under a running process), the connection's remembered append mode and read functions
    are dropped, so the next append or read asks again which the database has, and ``run()`` runs
    once more: the failed call ran nothing.  Inside a caller's transaction the error stands (it
    aborted the transaction); the next call there works."""
    try:
        return run()
    except ProgrammingError as exc:
        if not _forget_functions(connection, exc) or connection.in_atomic_block:
            raise
    return run()


UNDEFINED_FUNCTION = "42883"
"""SQLSTATE ``undefined_function``: a call whose function (with those argument types) does not exist."""


def _forget_functions(connection, exc: BaseException) -> bool:
    """Whether ``exc`` says a function of this library does not exist; if so, forget what the driver
    connection remembered of them.  Undefined functions of other names are not ours to excuse."""
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) != UNDEFINED_FUNCTION or "agent_sessions_" not in str(cause):
        return False
    raw = connection.connection
    if raw is not None:
        _APPEND_MODE.pop(raw, None)
        _READ_CALLS.pop(raw, None)
    return True


def _locked_insert(
    cursor, session_id: str, values: list, parent: str | None, *, auto: bool, stamp: object = None
) -> tuple | None:
    """Run the append (storage/appends.py) under the session's advisory lock, in one round trip.

    Normally one call of the ``agent_sessions_append`` function (storage/postgres_append.py:
    it keeps the plans), which also sets a registry ``stamp``.  A database not migrated that far
    (as while a deploy runs new code before ``migrate``) gets, in one transaction (see
    :func:`_together`): with the function but without its stamp argument, the call without the
    stamp, then :data:`appends.STAMP`; without the function, the lock, the statement (on a
    hash-partitioned table, with the probe that prunes) and the stamp.  ``values``: the row's eight
    values (see :func:`appends.params`).  None: the id already existed.
    """
    key = lock_key(session_id)
    mode = _append_mode(cursor)
    call = postgres_append.call_params(key, values, parent, auto=auto, stamp=stamp)
    if mode is _AppendMode.FUNCTION:
        cursor.execute(postgres_append.CALL, call)
        return cursor.fetchone()
    if mode is _AppendMode.UNSTAMPED_FUNCTION:
        statements = [(postgres_append.UNSTAMPED_CALL, call[:-1])]
    else:
        partitioned = mode is _AppendMode.PARTITIONED
        insert = appends.statement(parent, auto=auto, partitioned=partitioned)
        params = appends.params(values, session_id, parent, auto=auto, partitioned=partitioned)
        statements = [(LOCK, [key]), (insert, params)]
    answer = len(statements) - 1  # the insert's row
    if stamp is not None:
        statements.append((appends.STAMP, appends.stamp_params(stamp, session_id, values[0])))
    return _together(cursor, statements, answer)


def pop_latest(cursor, session_id: str, stamp: object) -> tuple | None:
    """Delete the session's latest leaf and stamp the registry row, under the session's lock, in one
    round trip (storage/pops.py); ``(content,)`` of the row removed, or None for an empty session."""
    return _together(cursor, [(LOCK, [lock_key(session_id)]), (pops.POP_LATEST, pops.pop_params(session_id, stamp))], 1)


def _together(cursor, statements: list[tuple[str, list]], answer: int) -> tuple | None:
    """Run ``statements`` as one transaction and return the first row of the one at index ``answer``.

    Several statements go as one simple-protocol query: one round trip, and in autocommit one
    transaction (the lock is held until the insert commits); inside an atomic block they join
    the caller's.  Parameters bound by the server allow one statement per command: then they go
    one by one, in one transaction of their own.
    """
    if len(statements) == 1:
        cursor.execute(*statements[0])
        return cursor.fetchone()
    if cursor.db.settings_dict["OPTIONS"].get("server_side_binding") is True:
        # One by one, in the caller's transaction or in one of their own (BEGIN … COMMIT: two
        # round trips more, about what the second commit they save costs; psycopg's pipeline mode
        # measured no faster).
        row = None
        with nullcontext() if not cursor.db.get_autocommit() else transaction.atomic(using=cursor.db.alias):
            for index, (sql, params) in enumerate(statements):
                cursor.execute(sql, params)
                if index == answer:
                    row = cursor.fetchone()
        return row
    cursor.execute("; ".join(sql for sql, _ in statements), [p for _, params in statements for p in params])
    for _ in range(answer):
        cursor.nextset()
    return cursor.fetchone()


class _AppendMode(enum.Enum):
    FUNCTION = "the append function"
    UNSTAMPED_FUNCTION = "the append function without the stamp argument (an older release's)"
    STATEMENT = "the statement, from the client (no function yet)"
    PARTITIONED = "the statement for a partitioned table, from the client (no function yet)"


# How a driver connection's database takes appends, asked once per connection (the function
# installed meanwhile is used from the next connection on; the function itself sees a table
# partitioned meanwhile at once).
_APPEND_MODE: weakref.WeakKeyDictionary[Any, _AppendMode] = weakref.WeakKeyDictionary()
_MODE_SQL = (
    "SELECT to_regprocedure(%s) IS NOT NULL, to_regprocedure(%s) IS NOT NULL, "
    "(SELECT c.relkind = 'p' FROM pg_catalog.pg_class c WHERE c.oid = 'assistant_messages'::regclass)"
)


def _append_mode(cursor) -> _AppendMode:
    """Asked on the driver's connection, so query logs and counts see only the append itself."""
    raw = cursor.db.connection
    mode = _APPEND_MODE.get(raw)
    if mode is None:
        signatures = [postgres_append.SIGNATURE, postgres_append.UNSTAMPED_SIGNATURE]
        with cursor.db.wrap_database_errors:
            stamped, unstamped, partitioned = raw.execute(_MODE_SQL, signatures).fetchone()
        if stamped:
            mode = _AppendMode.FUNCTION
        elif unstamped:
            mode = _AppendMode.UNSTAMPED_FUNCTION
        else:
            mode = _AppendMode.PARTITIONED if partitioned else _AppendMode.STATEMENT
        _APPEND_MODE[raw] = mode
    return mode


# Which read functions a database has is asked once per driver connection, as the append's mode is.
_READ_CALLS: weakref.WeakKeyDictionary[Any, ReadCalls] = weakref.WeakKeyDictionary()
_READS = (postgres_reads.RECENT, postgres_reads.PATH, postgres_reads.WINDOW)  # in ReadCalls order
_READS_SQL = "SELECT " + ", ".join(["to_regprocedure(%s) IS NOT NULL"] * len(_READS))


def read_calls(connection) -> ReadCalls:
    """What ``get_history`` and ``get_recent_history`` send for their range reads: each read
    function's call (storage/postgres_reads.py), or None for one the database lacks (not yet
    migrated): the statement is sent instead, or a window's first read reads on."""
    with connection.wrap_database_errors:
        connection.ensure_connection()
        raw = connection.connection
        calls = _READ_CALLS.get(raw)
        if calls is None:
            found = raw.execute(_READS_SQL, [read.signature for read in _READS]).fetchone()
            calls = _READ_CALLS[raw] = ReadCalls(
                *(read.call if has else None for read, has in zip(_READS, found, strict=True))
            )
        return calls


def _compile(cursor, query, target, filters):
    config = conf.pg_text_search_config()
    if target.table == SUMMARIES.table:  # the expression migration 0004's GIN index is built on
        quoted = "'" + config.replace("'", "''") + "'"
        target = replace(target, tsv=f"to_tsvector({quoted}::regconfig, {{m}}summary)")
    return tsquery.compile_query(query, target, filters, config)


_searcher = Searcher(_compile)
search_messages = _searcher.search_messages
search_entries = _searcher.search_entries
ranked_messages = _searcher.ranked_messages
match_keys = _searcher.match_keys
match_sql = _searcher.match_sql
search_summaries = _searcher.search_summaries


def estimated_rows(cursor, sql: str, params: list | tuple) -> int | None:
    """The planner's row estimate for ``sql`` (``EXPLAIN``, nothing runs): what a count past its
    exact threshold shows. None when the plan cannot be read."""
    cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
    row = cursor.fetchone()
    plan: Any = json.loads(row[0]) if row and isinstance(row[0], str) else (row[0] if row else None)
    try:
        return max(0, int(plan[0]["Plan"]["Plan Rows"]))
    except (TypeError, LookupError, ValueError):
        return None


def insert_many(cursor, table: str, columns: tuple[str, ...], param_rows: Iterable[list], per_statement: int) -> None:
    """Bulk insert with one ``COPY … FROM STDIN``: one statement, so statement-level triggers fire
    once, and no per-row parse or bind (executemany updated the session's counter row per row).
    Rows are sent as ``param_rows`` yields them, so the server indexes while the caller builds."""
    statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
    with cursor.db.wrap_database_errors, cursor.cursor.copy(statement) as copy:
        for row in param_rows:
            copy.write_row(row)


def in_list(values: list[str]) -> tuple[str, object]:
    """``column <this>`` tests membership in ``values``, bound as one array parameter."""
    return "= ANY(%s)", list(values)


def reserve_write(cursor) -> None:
    """Nothing to do: Postgres writers wait on row and advisory locks by themselves."""


def deferred_indexing(cursor, session_id: str, rows: int | None) -> AbstractContextManager[None]:
    """Nothing to defer: the tsvector columns are generated and the count trigger runs once per statement."""
    return nullcontext()


def server_closed(raw) -> bool:
    """True when an idle psycopg connection was closed by the server (restart, terminate).

    A server that shuts down sends an error and closes the socket, so an idle connection's
    socket turns readable; one zero-timeout ``select`` sees it without a round trip.
    """
    if getattr(raw, "closed", False) or getattr(raw, "broken", False):
        return True
    try:
        fd = raw.pgconn.socket
        readable, _, _ = select.select([fd], [], [], 0)
    except Exception:  # noqa: BLE001 - no socket to look at: let the next query tell
        return False
    return bool(readable)


# ── the per-session search index (check W015) ─────────────────────────
# One GIN index over (session_id, content_tsv) (btree_gin) instead of content_tsv alone:
# a per-session search intersects the session's entry with the words' inside one GIN scan,
# which skips through a common word's posting tree instead of reading all of it, and a
# cross-session search uses the same index's content_tsv column alone.  Every scan also
# reads the whole pending list of recent inserts (GIN fastupdate): capped at 256 kB instead
# of the server's 4 MB default, a search reads at most 32 pending pages instead of 512,
# while appends cost the same (measured in docs/scaling.md; fastupdate off doubled them).
# The initial migration builds it where btree_gin can be created; W015's hint gives these
# statements to an administrator where it could not.
SESSION_FTS_INSTALL = [
    "CREATE EXTENSION IF NOT EXISTS btree_gin",
    "CREATE INDEX IF NOT EXISTS idx_assistant_msg_session_fts ON assistant_messages "
    "USING GIN (session_id, content_tsv) WITH (gin_pending_list_limit = 256)",
    "DROP INDEX IF EXISTS idx_assistant_msg_fts",
]

PG_TRGM_INSTALL = "CREATE EXTENSION IF NOT EXISTS pg_trgm"
"""What an administrator runs once where the app's user may not create the extension (check E022)."""


def pg_trgm_state(alias: str) -> tuple[bool, bool, bool]:
    """``(installed, available, creatable)`` for pg_trgm on a Postgres alias."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'), "
            "EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'), "
            "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) "
            "OR has_database_privilege(current_database(), 'CREATE')"
        )
        installed, available, creatable = cursor.fetchone()
    return bool(installed), bool(available), bool(creatable)


def session_fts_missing(alias: str) -> bool:
    """The initial migration (or the step of the chain it replaced that built this index) is recorded
    on this alias, but the (session_id, content_tsv) index is missing (check W015)."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT to_regclass('django_migrations') IS NOT NULL AND to_regclass('assistant_messages') IS NOT NULL "
            "AND to_regclass('idx_assistant_msg_session_fts') IS NULL"
        )
        if not cursor.fetchone()[0]:
            return False
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM django_migrations WHERE app = 'agent_sessions' AND name IN (%s, %s))",
            ["0012_search_session_fts", "0001_squashed_0028_context_owner"],
        )
        return bool(cursor.fetchone()[0])
