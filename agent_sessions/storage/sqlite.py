"""SQLite-specific SQL: FTS5 indexes kept by triggers, byte sizes, locking.

Appends on SQLite need no explicit lock: the insert picks its parent inside the
same statement, and a writing statement holds the database's write lock from
its first read, so two writers can never pick the same parent.
"""

from __future__ import annotations

from ..search import fts5, plan
from ..search.run import Searcher

vendor = "sqlite"

BYTES_EXPR = "length(CAST({col} AS BLOB))"

_INSTALL = [
    # Message search (SPEC: `assistant_fts`, porter unicode61), external-content
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


def lock_session(cursor, session_id: str) -> None:
    """Nothing to do: SQLite serialises writers (see the module docstring)."""


def locked_insert(cursor, session_id: str, sql: str, params: list) -> tuple | None:
    """Run the append's ``INSERT … RETURNING`` as one statement, with no explicit transaction.

    The lone statement is atomic and takes the write lock before it reads the
    parent.  A deferred ``BEGIN`` would let two writers both take a read lock and
    then deadlock on the upgrade (SQLite then fails at once instead of waiting).
    """
    cursor.execute(sql, params)
    return cursor.fetchone()


_searcher = Searcher(fts5.compile_query)
search_messages = _searcher.search_messages
search_entries = _searcher.search_entries


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
    """Substring (CJK) search: trigram FTS5 tables beside the porter ones (migration 0005)."""
    return [
        *_trigram_sql(plan.MESSAGES.trigram, plan.MESSAGES.table, plan.MESSAGES.text),
        *_trigram_sql(plan.ENTRIES.trigram, plan.ENTRIES.table, plan.ENTRIES.text),
    ]


TRIGRAM_UNINSTALL = [
    f"{verb} IF EXISTS {fts}{suffix}"
    for fts in (plan.MESSAGES.trigram, plan.ENTRIES.trigram)
    for verb, suffix in (("DROP TRIGGER", "_ai"), ("DROP TRIGGER", "_ad"), ("DROP TRIGGER", "_au"), ("DROP TABLE", ""))
]


def insert_many(cursor, head: str, row_sql: str, param_rows: list[list], per_statement: int) -> None:
    """Bulk insert as multi-row ``INSERT … VALUES (…), (…)`` statements (faster than executemany here)."""
    for start in range(0, len(param_rows), per_statement):
        chunk = param_rows[start : start + per_statement]
        cursor.execute(head + ", ".join([row_sql] * len(chunk)), [v for row in chunk for v in row])


def reserve_write(cursor) -> None:
    """Take the write lock first thing in a transaction (what ``BEGIN IMMEDIATE`` does).

    A deferred transaction whose first statement touches an FTS5 table opens a
    read transaction while connecting the virtual table; upgrading that to a
    write fails at once with "database is locked" instead of waiting out the
    busy timeout.  A write that changes nothing, issued first, waits like any other.
    """
    cursor.execute("UPDATE assistant_sessions SET id = id WHERE 1 = 0")


def server_closed(raw) -> bool:
    """SQLite has no server to lose."""
    return False
