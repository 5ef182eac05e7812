"""The message-count triggers never move ``assistant_sessions.updated_at`` back.

They stamp the later of the stored ``updated_at`` and the database clock
(``greatest(…, clock_timestamp())`` on Postgres, ``max(…)`` of Django's text format on
SQLite), so a stamp the registry wrote with its own clock is never undercut.
"""

import pgtrigger.compiler
from django.db import migrations

from agent_sessions.schema import ReplaceTrigger

_COUNT = (
    "\n    UPDATE assistant_sessions AS s SET message_count = greatest(s.message_count {sign} n.c, 0),\n"
    "        updated_at = {stamp}\n"
    "    FROM (SELECT session_id, count(*) AS c FROM {rows} GROUP BY session_id) AS n WHERE s.id = n.session_id;\n"
    "    RETURN NULL;\n"
)


def _count_trigger(name, pgid, operation, referencing, sign, rows, stamp, hash):
    return pgtrigger.compiler.Trigger(
        name=name,
        sql=pgtrigger.compiler.UpsertTriggerSql(
            func=_COUNT.format(sign=sign, rows=rows, stamp=stamp),
            hash=hash,
            level="STATEMENT",
            operation=operation,
            pgid=pgid,
            referencing=referencing,
            table="assistant_messages",
            when="AFTER",
        ),
    )


_INSERTED = ("count_inserted_messages", "pgtrigger_count_inserted_messages_cf7ea", "INSERT")
_INSERTED += ("REFERENCING NEW TABLE AS new_messages ", "+", "new_messages")
_DELETED = ("count_deleted_messages", "pgtrigger_count_deleted_messages_9b7d6", "DELETE")
_DELETED += ("REFERENCING OLD TABLE AS old_messages ", "-", "old_messages")
_OLD_STAMP = "clock_timestamp()"
_NEW_STAMP = "greatest(s.updated_at, clock_timestamp())"

# SQLite's count triggers as migration 0008 made them (for the reverse).
_SQLITE_0008 = [
    """CREATE TRIGGER IF NOT EXISTS agent_sessions_count_inserted_messages
    AFTER INSERT ON assistant_messages BEGIN
        UPDATE assistant_sessions SET message_count = message_count + 1,
        updated_at = strftime('%Y-%m-%d %H:%M:%f', 'now') WHERE id = NEW.session_id;
    END""",
    """CREATE TRIGGER IF NOT EXISTS agent_sessions_count_deleted_messages
    AFTER DELETE ON assistant_messages BEGIN
        UPDATE assistant_sessions SET message_count = max(message_count - 1, 0),
        updated_at = strftime('%Y-%m-%d %H:%M:%f', 'now') WHERE id = OLD.session_id;
    END""",
]


def _sqlite_triggers(create):
    def run(apps, schema_editor):
        from agent_sessions.storage import ddl, sqlite

        ddl.run_on(schema_editor, ddl.SQLITE, lambda _: sqlite.count_trigger_sql(create))

    return run


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0013_search_partial_trgm")]

    operations = [
        ReplaceTrigger(
            model_name="message",
            old=_count_trigger(*_INSERTED, _OLD_STAMP, "4dbf48c9ee88618faec7fa26f15268aa9cf1b65c"),
            new=_count_trigger(*_INSERTED, _NEW_STAMP, "b9ac90a8180eae4df621508ebcd2951cb21e4712"),
        ),
        ReplaceTrigger(
            model_name="message",
            old=_count_trigger(*_DELETED, _OLD_STAMP, "c4efc29e1fca2632d117606b7dcb07302f2e52a8"),
            new=_count_trigger(*_DELETED, _NEW_STAMP, "434160c3cad9cb3e9f6f3669d4187949d8ba5c9b"),
        ),
        migrations.RunPython(_sqlite_triggers(None), _sqlite_triggers(_SQLITE_0008), elidable=False),
    ]
