"""Migration operations of search: trigram indexes (substring search), the indexed tool text column."""

from __future__ import annotations

import json

from ..types import tool_text
from . import backends, postgres, sqlite
from .ddl import BOTH, SQLITE, run_on, run_on_postgres


def install_trigram(apps, schema_editor) -> None:
    """Create the vendor's trigram index (FTS5 ``trigram`` tables, or pg_trgm GIN indexes)."""
    run_on(schema_editor, BOTH, lambda vendor: backends.for_vendor(vendor).trigram_install_sql())


def uninstall_trigram(apps, schema_editor) -> None:
    """Reverse of :func:`install_trigram`."""
    run_on(schema_editor, BOTH, lambda vendor: backends.for_vendor(vendor).TRIGRAM_UNINSTALL)


def install_tool_text(apps, schema_editor) -> None:
    """Add ``assistant_messages.tool_text``, fill it from the stored messages, and index it for search."""
    vendor = schema_editor.connection.vendor
    if vendor not in BOTH:
        schema_editor.execute("ALTER TABLE assistant_messages ADD COLUMN tool_text TEXT DEFAULT '' NOT NULL")
        return
    backend = backends.for_vendor(vendor)
    for statement in backend.TOOL_TEXT_ADD + getattr(backend, "DROP_MESSAGE_TSV", []):
        schema_editor.execute(statement)
    with schema_editor.connection.cursor() as cursor:
        backfill_tool_text(cursor)
    for statement in backend.tool_text_index_sql():
        schema_editor.execute(statement)


def uninstall_tool_text(apps, schema_editor) -> None:
    """Reverse of :func:`install_tool_text`: text-only indexes again, then drop the column."""
    vendor = schema_editor.connection.vendor
    if vendor not in BOTH:
        schema_editor.execute("ALTER TABLE assistant_messages DROP COLUMN tool_text")
        return
    backend = backends.for_vendor(vendor)
    statements = getattr(backend, "DROP_MESSAGE_TSV", []) + backend.tool_text_index_sql(with_tool_text=False)
    for statement in statements + backend.TOOL_TEXT_DROP:
        schema_editor.execute(statement)


_BACKFILL_BATCH = 2_000


def backfill_tool_text(cursor) -> int:
    """Set ``tool_text`` of every stored message that has tool or reasoning parts; returns rows updated.

    Walks the table by ``seq`` in batches, so memory stays bounded on a large table.
    """
    updated, last = 0, -1
    while True:
        cursor.execute(
            "SELECT seq, content FROM assistant_messages WHERE seq > %s ORDER BY seq LIMIT %s", [last, _BACKFILL_BATCH]
        )
        rows = cursor.fetchall()
        if not rows:
            return updated
        changes = []
        for seq, content in rows:
            text = _tool_text_of(content)
            if text:
                changes.append([text, seq])
        if changes:
            cursor.executemany("UPDATE assistant_messages SET tool_text = %s WHERE seq = %s", changes)
            updated += len(changes)
        last = rows[-1][0]


def _tool_text_of(content: object) -> str:
    if not isinstance(content, str) or ("tool" not in content and "reasoning" not in content):
        return ""  # cheap pre-check: most rows are plain text
    try:
        message = json.loads(content)
        # A row that holds no message (not JSON, too deep, parts not a list) has no tool text.
        return tool_text(message) if isinstance(message, dict) and isinstance(message.get("parts"), list) else ""
    except (ValueError, RecursionError):
        return ""


def install_session_fts(apps, schema_editor) -> None:
    """Postgres: the words' GIN index also keyed by session_id (btree_gin); kept as is without btree_gin."""
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        usable = postgres.btree_gin_usable(cursor)
    if usable:
        run_on_postgres(schema_editor, postgres.SESSION_FTS_INSTALL)


def uninstall_session_fts(apps, schema_editor) -> None:
    """Reverse of :func:`install_session_fts` (the extension stays: others may use it)."""
    run_on_postgres(schema_editor, postgres.SESSION_FTS_UNINSTALL)


def install_partial_trigram(apps, schema_editor) -> None:
    """Postgres: the text trigram index only over rows with a non-ASCII character."""
    run_on_postgres(schema_editor, postgres.PARTIAL_TRGM_INSTALL)


def uninstall_partial_trigram(apps, schema_editor) -> None:
    """Reverse of :func:`install_partial_trigram`: the trigram index over every row again."""
    run_on_postgres(schema_editor, postgres.PARTIAL_TRGM_UNINSTALL)


def trigram_without_ascii_text(apps, schema_editor) -> None:
    """SQLite: all-ASCII message text leaves the trigram index, which only substring (never ASCII) terms read
    (Postgres gets the same from its partial index, :func:`install_partial_trigram`)."""
    run_on(schema_editor, SQLITE, lambda _: sqlite.tool_text_index_sql(ascii_text=False))


def trigram_with_ascii_text(apps, schema_editor) -> None:
    """Reverse of :func:`trigram_without_ascii_text`: every message's text in the trigram index again."""
    run_on(schema_editor, SQLITE, lambda _: sqlite.tool_text_index_sql())
