"""SQLite-specific SQL: FTS5 indexes kept by triggers, byte sizes, locking.

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

from .. import triggers
from ..search import fts5, plan
from ..search.run import Searcher
from . import appends, bare_reads
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

_INSTALL = [
    # Message search (`assistant_fts`, porter unicode61, docs/data-model.md), external-content
    # table over assistant_messages keyed by its `seq` rowid.
    """CREATE VIRTUAL TABLE IF NOT EXISTS assistant_fts USING fts5(
        text_content, content='assistant_messages', content_rowid='seq',
        tokenize='porter unicode61')""",
    """CREATE TRIGGER IF NOT EXISTS assistant_fts_ai AFTER INSERT ON assistant_messages BEGIN
        INSERT INTO assistant_fts(rowid, text_content) VALUES (new.seq, new.text_content);
    END""",
    """CREATE TRIGGER IF NOT EXISTS assistant_fts_ad AFTER DELETE ON assistant_messages BEGIN
        INSERT INTO assistant_fts(assistant_fts, rowid, text_content) VALUES ('delete', old.seq, old.text_content);
    END""",
    """CREATE TRIGGER IF NOT EXISTS assistant_fts_au AFTER UPDATE OF text_content ON assistant_messages BEGIN
        INSERT INTO assistant_fts(assistant_fts, rowid, text_content) VALUES ('delete', old.seq, old.text_content);
        INSERT INTO assistant_fts(rowid, text_content) VALUES (new.seq, new.text_content);
    END""",
    "INSERT INTO assistant_fts(assistant_fts) VALUES ('rebuild')",
    # Knowledge entries (`cf_agents_search_fts`, as the seed names it).
    """CREATE VIRTUAL TABLE IF NOT EXISTS cf_agents_search_fts USING fts5(
        content, content='cf_agents_search_entries', content_rowid='seq',
        tokenize='porter unicode61')""",
    """CREATE TRIGGER IF NOT EXISTS cf_agents_search_fts_ai AFTER INSERT ON cf_agents_search_entries BEGIN
        INSERT INTO cf_agents_search_fts(rowid, content) VALUES (new.seq, new.content);
    END""",
    """CREATE TRIGGER IF NOT EXISTS cf_agents_search_fts_ad AFTER DELETE ON cf_agents_search_entries BEGIN
        INSERT INTO cf_agents_search_fts(cf_agents_search_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    END""",
    """CREATE TRIGGER IF NOT EXISTS cf_agents_search_fts_au AFTER UPDATE OF content ON cf_agents_search_entries BEGIN
        INSERT INTO cf_agents_search_fts(cf_agents_search_fts, rowid, content) VALUES ('delete', old.seq, old.content);
        INSERT INTO cf_agents_search_fts(rowid, content) VALUES (new.seq, new.content);
    END""",
    "INSERT INTO cf_agents_search_fts(cf_agents_search_fts) VALUES ('rebuild')",
]

UNINSTALL = [
    "DROP TRIGGER IF EXISTS assistant_fts_ai",
    "DROP TRIGGER IF EXISTS assistant_fts_ad",
    "DROP TRIGGER IF EXISTS assistant_fts_au",
    "DROP TABLE IF EXISTS assistant_fts",
    "DROP TRIGGER IF EXISTS cf_agents_search_fts_ai",
    "DROP TRIGGER IF EXISTS cf_agents_search_fts_ad",
    "DROP TRIGGER IF EXISTS cf_agents_search_fts_au",
    "DROP TABLE IF EXISTS cf_agents_search_fts",
]


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


_searcher = Searcher(fts5.compile_query)
search_messages = _searcher.search_messages
search_entries = _searcher.search_entries
ranked_messages = _searcher.ranked_messages
match_keys = _searcher.match_keys


def install_sql() -> list[str]:
    """Statements that create the FTS5 tables and the triggers that keep them in sync."""
    return list(_INSTALL)


def _trigram_sql(fts: str, table: str, column: str) -> list[str]:
    """A trigram FTS5 index over ``table.column`` (external content, rowid = seq) and its triggers."""
    return [
        f"""CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING fts5(
            {column}, content='{table}', content_rowid='seq', tokenize='trigram')""",
        f"""CREATE TRIGGER IF NOT EXISTS {fts}_ai AFTER INSERT ON {table} BEGIN
            INSERT INTO {fts}(rowid, {column}) VALUES (new.seq, new.{column});
        END""",
        f"""CREATE TRIGGER IF NOT EXISTS {fts}_ad AFTER DELETE ON {table} BEGIN
            INSERT INTO {fts}({fts}, rowid, {column}) VALUES ('delete', old.seq, old.{column});
        END""",
        f"""CREATE TRIGGER IF NOT EXISTS {fts}_au AFTER UPDATE OF {column} ON {table} BEGIN
            INSERT INTO {fts}({fts}, rowid, {column}) VALUES ('delete', old.seq, old.{column});
            INSERT INTO {fts}(rowid, {column}) VALUES (new.seq, new.{column});
        END""",
        f"INSERT INTO {fts}({fts}) VALUES ('rebuild')",
    ]


def trigram_install_sql() -> list[str]:
    """Substring (CJK) search: trigram FTS5 tables beside the porter ones."""
    return [
        *_trigram_sql(plan.MESSAGES.trigram, plan.MESSAGES.table, plan.MESSAGES.text),
        *_trigram_sql(plan.ENTRIES.trigram, plan.ENTRIES.table, plan.ENTRIES.text),
    ]


TRIGRAM_UNINSTALL = [
    f"{verb} IF EXISTS {fts}{suffix}"
    for fts in (plan.MESSAGES.trigram, plan.ENTRIES.trigram)
    for verb, suffix in (("DROP TRIGGER", "_ai"), ("DROP TRIGGER", "_ad"), ("DROP TRIGGER", "_au"), ("DROP TABLE", ""))
]


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


# The triggers of agent_sessions.triggers (Postgres: django-pgtrigger), in SQLite's dialect.
def _sqlite_suffix(column: str) -> str:
    return f"substr({column}, -(length(OLD.id) + 1)) = '_' || OLD.id"


# Django's text format for datetimes, to the millisecond (the best SQLite's clock gives).
_NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now')"
# The later of the stored stamp and the clock, so the count triggers never move ``updated_at``
# back (the registry stamps it to the microsecond with its own clock, manager/clock.py).  Both
# are text in Django's format, "YYYY-MM-DD HH:MM:SS[.fff…]", which sorts as the time does: a
# millisecond stamp that is a prefix of a microsecond one sorts first, as its truncation should.
_LATER = f"max(updated_at, {_NOW})"


def _count_inserted_trigger(when: str) -> str:
    return (
        f"CREATE TRIGGER IF NOT EXISTS agent_sessions_count_inserted_messages\n"
        f"    AFTER INSERT ON assistant_messages {when}BEGIN\n"
        f"        UPDATE assistant_sessions SET message_count = message_count + 1, updated_at = {_LATER}\n"
        f"        WHERE id = NEW.session_id;\n"
        f"    END"
    )


_TRIGGERS = [
    # A session's rows of the label-keyed tables: those it owns, and an ownerless stored prompt
    # under its exact key (storage/owners.py).  The current version; a schema whose label-keyed
    # tables have no owner column yet has :data:`_CASCADE_BY_SUFFIX` instead.
    """CREATE TRIGGER IF NOT EXISTS agent_sessions_cascade_session_delete
    AFTER DELETE ON assistant_sessions WHEN OLD.id <> '' BEGIN
        DELETE FROM assistant_messages WHERE session_id = OLD.id;
        DELETE FROM assistant_compactions WHERE session_id = OLD.id;
        DELETE FROM agent_sessions_compaction_jobs WHERE session_id = OLD.id;
        DELETE FROM cf_agents_context_blocks WHERE session_id = OLD.id;
        DELETE FROM cf_agents_context_blocks WHERE session_id IS NULL AND label = '_system_prompt_' || OLD.id;
        DELETE FROM cf_agents_search_entries WHERE session_id = OLD.id;
    END""",
    _count_inserted_trigger(""),
    f"""CREATE TRIGGER IF NOT EXISTS agent_sessions_count_deleted_messages
    AFTER DELETE ON assistant_messages BEGIN
        UPDATE assistant_sessions SET message_count = max(message_count - 1, 0), updated_at = {_LATER}
        WHERE id = OLD.session_id;
    END""",
    """CREATE TRIGGER IF NOT EXISTS agent_sessions_count_existing_messages
    AFTER INSERT ON assistant_sessions BEGIN
        UPDATE assistant_sessions
        SET message_count = (SELECT count(*) FROM assistant_messages WHERE session_id = NEW.id) WHERE id = NEW.id;
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS agent_sessions_protect_message_tree
    BEFORE UPDATE OF id, session_id, parent_id ON assistant_messages
    WHEN OLD.id IS NOT NEW.id OR OLD.session_id IS NOT NEW.session_id OR OLD.parent_id IS NOT NEW.parent_id
    BEGIN
        SELECT RAISE(ABORT, '{triggers.TREE_ERROR}');
    END""",
]

TRIGGER_UNINSTALL = [
    "DROP TRIGGER IF EXISTS agent_sessions_cascade_session_delete",
    "DROP TRIGGER IF EXISTS agent_sessions_protect_message_tree",
    "DROP TRIGGER IF EXISTS agent_sessions_count_inserted_messages",
    "DROP TRIGGER IF EXISTS agent_sessions_count_deleted_messages",
    "DROP TRIGGER IF EXISTS agent_sessions_count_existing_messages",
]


# The cascade for label-keyed tables without an owner column: a session's rows found by the
# label's suffix.
_CASCADE_BY_SUFFIX = f"""CREATE TRIGGER IF NOT EXISTS agent_sessions_cascade_session_delete
    AFTER DELETE ON assistant_sessions WHEN OLD.id <> '' BEGIN
        DELETE FROM assistant_messages WHERE session_id = OLD.id;
        DELETE FROM assistant_compactions WHERE session_id = OLD.id;
        DELETE FROM agent_sessions_compaction_jobs WHERE session_id = OLD.id;
        DELETE FROM cf_agents_context_blocks WHERE {_sqlite_suffix("label")};
        DELETE FROM cf_agents_search_entries WHERE {_sqlite_suffix("label")};
    END"""


def trigger_install_sql() -> list[str]:
    """Cascade a session delete to its rows, count messages, refuse updates that move a message.

    The cascade is the one by label suffix (:data:`_CASCADE_BY_SUFFIX`), for tables without an owner
    column; the migration that adds that column replaces it with the owner-column version above.
    """
    return [_CASCADE_BY_SUFFIX, *_TRIGGERS[1:]]


COUNT_TRIGGERS = ("agent_sessions_count_inserted_messages", "agent_sessions_count_deleted_messages")


def count_trigger_sql(create: list[str] | None = None) -> list[str]:
    """Drop and recreate the two message-count triggers, from ``create`` or the current text.

    SQLite cannot replace a trigger in place; the other triggers are left as they are.
    """
    if create is None:
        create = [sql for sql in _TRIGGERS if any(f" {name}\n" in sql for name in COUNT_TRIGGERS)]
    return [*(f"DROP TRIGGER IF EXISTS {name}" for name in COUNT_TRIGGERS), *create]


def _indexed(columns: tuple[str, ...], values: dict, prefix: str) -> str:
    """What an FTS index's triggers index for ``columns``: the column, or its ``values`` expression."""
    return ", ".join(values.get(c, "{row}" + c).format(row=prefix) for c in columns)


def _fts_insert_trigger(fts: str, table: str, columns: tuple[str, ...], values: dict, when: str = "") -> str:
    return (
        f"CREATE TRIGGER {fts}_ai AFTER INSERT ON {table} {when}BEGIN "
        f"INSERT INTO {fts}(rowid, {', '.join(columns)}) VALUES (new.seq, {_indexed(columns, values, 'new.')}); END"
    )


def _fts_sql(
    fts: str, table: str, columns: tuple[str, ...], tokenize: str, *, content: str = "", values: dict | None = None
) -> list[str]:
    """(Re)create an external-content FTS5 index over ``columns`` of ``table``, its triggers, and fill it.

    ``content`` names the table or view the index reads (default ``table``); ``values`` maps
    a column to the SQL its triggers index, with ``{row}`` for ``new.`` / ``old.`` (it must
    be the same expression the content view selects, or the index drifts).
    """
    values = values or {}
    cols = ", ".join(columns)
    new, old = _indexed(columns, values, "new."), _indexed(columns, values, "old.")
    return [
        *(f"DROP TRIGGER IF EXISTS {fts}_{suffix}" for suffix in ("ai", "ad", "au")),
        f"DROP TABLE IF EXISTS {fts}",
        f"CREATE VIRTUAL TABLE {fts} USING fts5({cols}, content='{content or table}', content_rowid='seq', "
        f"tokenize='{tokenize}')",
        _fts_insert_trigger(fts, table, columns, values),
        f"CREATE TRIGGER {fts}_ad AFTER DELETE ON {table} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {cols}) VALUES ('delete', old.seq, {old}); END",
        f"CREATE TRIGGER {fts}_au AFTER UPDATE OF {cols} ON {table} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {cols}) VALUES ('delete', old.seq, {old}); "
        f"INSERT INTO {fts}(rowid, {cols}) VALUES (new.seq, {new}); END",
        f"INSERT INTO {fts}({fts}) VALUES ('rebuild')",
    ]


TOOL_TEXT_ADD = ["ALTER TABLE assistant_messages ADD COLUMN tool_text TEXT NOT NULL DEFAULT ''"]
TOOL_TEXT_DROP = ["ALTER TABLE assistant_messages DROP COLUMN tool_text"]

# The trigram index serves only substring terms, which are in scripts written without
# spaces (never ASCII): a column value that is all ASCII can never match one.  Trigram-indexing
# every 3-character window of such values is most of an append's cost (10,000 English rows:
# 805 ms of FTS work with the full index, 297 ms without), so the trigram index reads messages
# through a view that blanks all-ASCII values (as many characters as bytes: an O(1) blob length
# against a character count, far cheaper than a character class).  It blanks the tool text and
# the text, as Postgres' partial index leaves all-ASCII text out; an older schema's view blanks
# the tool text only (``ascii_text=True`` below).
TRIGRAM_SOURCE = "assistant_messages_trigram_source"
_NON_ASCII_ONLY = "CASE WHEN length(CAST({{row}}{col} AS BLOB)) = length({{row}}{col}) THEN '' ELSE {{row}}{col} END"


def _trigram_values(*, ascii_text: bool) -> dict[str, str]:
    """What the trigram index indexes in place of each message column it blanks when all-ASCII: the tool
    text always, the text too unless ``ascii_text`` (the older layout that indexes all-ASCII text)."""
    m = plan.MESSAGES
    blanked = [m.extra] if ascii_text else [m.text, m.extra]
    return {c: _NON_ASCII_ONLY.format(col=c) for c in blanked}


def tool_text_index_sql(*, with_tool_text: bool = True, ascii_text: bool = True) -> list[str]:
    """The message FTS5 indexes over ``text_content`` and ``tool_text`` (or ``text_content`` alone, the
    layout without tool text); ``ascii_text=False`` leaves all-ASCII text out of the trigram index."""
    m = plan.MESSAGES
    if not with_tool_text:
        return [
            *_fts_sql(m.fts, m.table, (m.text,), "porter unicode61"),
            *_fts_sql(m.trigram, m.table, (m.text,), "trigram"),
            f"DROP VIEW IF EXISTS {TRIGRAM_SOURCE}",
        ]
    columns = (m.text, m.extra)
    blanked = _trigram_values(ascii_text=ascii_text)
    view_columns = ", ".join(f"{blanked.get(c, '{row}' + c).format(row='')} AS {c}" for c in columns)
    return [
        *_fts_sql(m.fts, m.table, columns, "porter unicode61"),
        f"DROP TABLE IF EXISTS {m.trigram}",  # before its view goes
        f"DROP VIEW IF EXISTS {TRIGRAM_SOURCE}",
        f"CREATE VIEW {TRIGRAM_SOURCE} AS SELECT seq, {view_columns} FROM {m.table}",
        *_fts_sql(m.trigram, m.table, columns, "trigram", content=TRIGRAM_SOURCE, values=blanked),
    ]


def upgrade_keys(cursor, path_key_index: str) -> None:
    """SQLite keeps ``seq`` as its rowid key (no partitions); only the walk's key index gains session_id."""
    cursor.execute("DROP INDEX IF EXISTS assistant_msg_path_key")
    cursor.execute(path_key_index)


def downgrade_keys(cursor, old_path_key_index: str) -> None:
    """Reverse of :func:`upgrade_keys`."""
    cursor.execute("DROP INDEX IF EXISTS assistant_msg_path_key")
    cursor.execute(old_path_key_index)


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
_WHEN_NOT_DEFERRED = f"WHEN NOT EXISTS (SELECT 1 FROM {DEFERRED_INDEX} WHERE session_id = new.session_id) "
DEFER_AT = 32
"""Bulk writes of at least this many rows index after the rows (below it the extra statements cost more)."""


def _message_indexes() -> list[tuple[str, tuple[str, ...], dict]]:
    """``(fts table, columns, values)`` of the two message indexes: text and tool text, the trigram index
    without all-ASCII values."""
    m = plan.MESSAGES
    columns = (m.text, m.extra)
    return [(m.fts, columns, {}), (m.trigram, columns, _trigram_values(ascii_text=False))]


def deferrable_insert_triggers_sql(*, deferrable: bool = True) -> list[str]:
    """The message insert triggers (both FTS indexes, the count) with the skip for a deferred session, or
    (``deferrable=False``, the reverse) without it: every row indexed and counted by its trigger."""
    when = _WHEN_NOT_DEFERRED if deferrable else ""
    table = plan.MESSAGES.table
    statements = []
    if deferrable:
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {DEFERRED_INDEX} "
            "(session_id TEXT PRIMARY KEY, after_seq INTEGER NOT NULL) WITHOUT ROWID"
        )
    for fts, columns, values in _message_indexes():
        statements += [f"DROP TRIGGER IF EXISTS {fts}_ai", _fts_insert_trigger(fts, table, columns, values, when)]
    statements += ["DROP TRIGGER IF EXISTS agent_sessions_count_inserted_messages", _count_inserted_trigger(when)]
    if not deferrable:
        statements.append(f"DROP TABLE IF EXISTS {DEFERRED_INDEX}")
    return statements


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
