"""Search finds file names and compaction summaries (issue 55).

* ``tool_text`` starts with the names of a message's file parts (``{"type": "file", "filename": …}``),
  as :func:`agent_sessions.types.tool_text` writes it now; existing rows get theirs here, so both
  databases' indexes (kept by the triggers / the generated column) see them.
* Compaction summaries get a full-text index: SQLite, two external-content FTS5 tables (words,
  trigrams) kept by triggers and rebuilt here; Postgres, a GIN index over
  ``to_tsvector(<AGENT_SESSIONS_PG_TEXT_SEARCH_CONFIG>, summary)``, the expression the searches use.

The SQL is literal, per vendor (the text search configuration is the one placeholder).
"""

from django.conf import settings
from django.db import migrations

SQLITE = [
    # File names first, then whatever tool text the row had (newline-separated, as tool_text() joins).
    """UPDATE assistant_messages SET tool_text = (
    SELECT group_concat(json_extract(p.value, '$.filename'), char(10))
    FROM json_each(assistant_messages.content, '$.parts') AS p
    WHERE json_extract(p.value, '$.type') = 'file' AND json_type(p.value, '$.filename') = 'text'
      AND trim(json_extract(p.value, '$.filename')) <> ''
) || CASE WHEN tool_text = '' THEN '' ELSE char(10) || tool_text END
WHERE content LIKE '%"filename"%' AND json_valid(content) AND json_type(content, '$.parts') = 'array'
  AND EXISTS (
    SELECT 1 FROM json_each(assistant_messages.content, '$.parts') AS p
    WHERE json_extract(p.value, '$.type') = 'file' AND json_type(p.value, '$.filename') = 'text'
      AND trim(json_extract(p.value, '$.filename')) <> ''
  )""",
    "CREATE VIRTUAL TABLE assistant_compactions_fts USING fts5(summary, content='assistant_compactions', "
    "content_rowid='seq', tokenize='porter unicode61')",
    "CREATE VIRTUAL TABLE assistant_compactions_fts_trigram USING fts5(summary, content='assistant_compactions', "
    "content_rowid='seq', tokenize='trigram')",
    "CREATE TRIGGER assistant_compactions_fts_ai AFTER INSERT ON assistant_compactions BEGIN "
    "INSERT INTO assistant_compactions_fts(rowid, summary) VALUES (new.seq, new.summary); "
    "INSERT INTO assistant_compactions_fts_trigram(rowid, summary) VALUES (new.seq, new.summary); END",
    "CREATE TRIGGER assistant_compactions_fts_ad AFTER DELETE ON assistant_compactions BEGIN "
    "INSERT INTO assistant_compactions_fts(assistant_compactions_fts, rowid, summary) "
    "VALUES ('delete', old.seq, old.summary); "
    "INSERT INTO assistant_compactions_fts_trigram(assistant_compactions_fts_trigram, rowid, summary) "
    "VALUES ('delete', old.seq, old.summary); END",
    "CREATE TRIGGER assistant_compactions_fts_au AFTER UPDATE OF summary ON assistant_compactions BEGIN "
    "INSERT INTO assistant_compactions_fts(assistant_compactions_fts, rowid, summary) "
    "VALUES ('delete', old.seq, old.summary); "
    "INSERT INTO assistant_compactions_fts_trigram(assistant_compactions_fts_trigram, rowid, summary) "
    "VALUES ('delete', old.seq, old.summary); "
    "INSERT INTO assistant_compactions_fts(rowid, summary) VALUES (new.seq, new.summary); "
    "INSERT INTO assistant_compactions_fts_trigram(rowid, summary) VALUES (new.seq, new.summary); END",
    "INSERT INTO assistant_compactions_fts(assistant_compactions_fts) VALUES ('rebuild')",
    "INSERT INTO assistant_compactions_fts_trigram(assistant_compactions_fts_trigram) VALUES ('rebuild')",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS assistant_compactions_fts_au",
    "DROP TRIGGER IF EXISTS assistant_compactions_fts_ad",
    "DROP TRIGGER IF EXISTS assistant_compactions_fts_ai",
    "DROP TABLE IF EXISTS assistant_compactions_fts_trigram",
    "DROP TABLE IF EXISTS assistant_compactions_fts",
]

POSTGRES = [
    """UPDATE assistant_messages AS m SET tool_text = f.names || CASE WHEN m.tool_text = '' THEN '' ELSE E'\\n' || m.tool_text END
FROM (
    SELECT a.session_id, a.seq, string_agg(p.part ->> 'filename', E'\\n' ORDER BY p.n) AS names
    FROM assistant_messages AS a
    CROSS JOIN LATERAL json_array_elements(a.content::json -> 'parts') WITH ORDINALITY AS p(part, n)
    WHERE a.content LIKE '%"filename"%' AND json_typeof(a.content::json -> 'parts') = 'array'
      AND json_typeof(p.part) = 'object' AND p.part ->> 'type' = 'file'
      AND json_typeof(p.part -> 'filename') = 'string' AND strpos((p.part -> 'filename')::text, '\\u0000') = 0
      AND btrim(p.part ->> 'filename') <> ''
    GROUP BY a.session_id, a.seq
) AS f
WHERE m.session_id = f.session_id AND m.seq = f.seq""",
    "CREATE INDEX IF NOT EXISTS assistant_cmp_summary_fts ON assistant_compactions "
    "USING gin (to_tsvector('__TS_CONFIG__'::regconfig, summary))",
]
POSTGRES_REVERSE = ["DROP INDEX IF EXISTS assistant_cmp_summary_fts"]

FORWARDS = {"postgresql": POSTGRES, "sqlite": SQLITE}
BACKWARDS = {"postgresql": POSTGRES_REVERSE, "sqlite": SQLITE_REVERSE}


def _run(statements: list[str], schema_editor) -> None:
    config = str(getattr(settings, "AGENT_SESSIONS_PG_TEXT_SEARCH_CONFIG", "english")).replace("'", "''")
    for statement in statements:
        schema_editor.execute(statement.replace("__TS_CONFIG__", config), params=None)  # verbatim: % is literal


def forwards(apps, schema_editor) -> None:
    """The SQL above on PostgreSQL and SQLite; nothing elsewhere (no search there)."""
    _run(FORWARDS.get(schema_editor.connection.vendor, []), schema_editor)


def backwards(apps, schema_editor) -> None:
    """Drop the summary indexes (file names stay in tool_text: it is search text only)."""
    _run(BACKWARDS.get(schema_editor.connection.vendor, []), schema_editor)


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0003_admin_permissions")]

    operations = [migrations.RunPython(forwards, backwards)]
