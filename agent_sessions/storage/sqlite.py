"""SQLite-specific SQL: FTS5 indexes kept by triggers, byte sizes, locking.

Appends on SQLite need no explicit lock: the insert picks its parent inside the
same statement, and a writing statement holds the database's write lock from
its first read, so two writers can never pick the same parent.
"""

from __future__ import annotations

import contextlib

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


def _match_expression(terms: list[str]) -> str:
    # Every term becomes a quoted FTS5 string: implicit AND, no operators.
    return " ".join('"' + t.replace('"', '""') + '"' for t in terms)


def lock_session(cursor, session_id: str) -> None:
    """Nothing to do: SQLite serialises writers (see the module docstring)."""


def append_transaction(connection):
    """No explicit transaction: the single ``INSERT … SELECT`` is atomic by itself.

    A deferred ``BEGIN`` would let two writers both take a read lock and then
    deadlock on the upgrade (SQLite then fails at once instead of waiting);
    a lone write statement takes the write lock up front and waits its turn.
    """
    return contextlib.nullcontext()


def search_messages(cursor, session_id: str | None, terms: list[str], limit: int) -> list[tuple]:
    """Rows ``(id, role, text_content, created_at, session_id)``, best match first."""
    sql = (
        "SELECT m.id, m.role, m.text_content, m.created_at, m.session_id "
        "FROM assistant_fts JOIN assistant_messages m ON m.seq = assistant_fts.rowid "
        "WHERE assistant_fts MATCH %s"
    )
    params: list = [_match_expression(terms)]
    if session_id is not None:
        sql += " AND m.session_id = %s"
        params.append(session_id)
    sql += " ORDER BY bm25(assistant_fts), m.seq LIMIT %s"
    params.append(limit)
    cursor.execute(sql, params)
    return cursor.fetchall()


def search_entries(cursor, label: str, terms: list[str], limit: int) -> list[tuple]:
    """Rows ``(key, content)`` of one label's entries, best match first."""
    cursor.execute(
        "SELECT e.key, e.content FROM cf_agents_search_fts "
        "JOIN cf_agents_search_entries e ON e.seq = cf_agents_search_fts.rowid "
        "WHERE cf_agents_search_fts MATCH %s AND e.label = %s "
        "ORDER BY bm25(cf_agents_search_fts), e.seq LIMIT %s",
        [_match_expression(terms), label, limit],
    )
    return cursor.fetchall()


def install_sql() -> list[str]:
    """Statements that create the FTS5 tables and the triggers that keep them in sync."""
    return list(_INSTALL)
