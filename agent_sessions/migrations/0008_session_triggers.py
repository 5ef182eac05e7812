"""Triggers: a session delete cascades to its rows, messages are counted, a message cannot move in the tree.

``assistant_sessions.message_count`` is added with plain DDL (no table rebuild on
SQLite, which would drop triggers) and filled from the rows already there.
Postgres: django-pgtrigger triggers (see agent_sessions.triggers).  SQLite: the
same behaviour as its own triggers (agent_sessions.storage.sqlite.trigger_install_sql).
"""

import pgtrigger.compiler
from django.db import migrations, models

from agent_sessions.schema import AddTrigger, install_sqlite_triggers, uninstall_sqlite_triggers

ADD_COUNT = "ALTER TABLE assistant_sessions ADD COLUMN message_count bigint NOT NULL DEFAULT 0"
FILL_COUNT = (
    "UPDATE assistant_sessions SET message_count = "
    "(SELECT count(*) FROM assistant_messages m WHERE m.session_id = assistant_sessions.id)"
)


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0007_session_relations")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="sessionrecord",
                    name="message_count",
                    field=models.BigIntegerField(
                        db_default=0,
                        default=0,
                        editable=False,
                        help_text="Stored messages (every branch), kept by triggers.",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(ADD_COUNT, "ALTER TABLE assistant_sessions DROP COLUMN message_count"),
                migrations.RunSQL(FILL_COUNT, migrations.RunSQL.noop),
            ],
        ),
        AddTrigger(
            model_name="message",
            trigger=pgtrigger.compiler.Trigger(
                name="protect_message_tree",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition="WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.session_id IS DISTINCT FROM NEW.session_id OR OLD.parent_id IS DISTINCT FROM NEW.parent_id)",
                    func="RAISE EXCEPTION 'agent_sessions: the id, session_id and parent_id of a stored message never change' USING ERRCODE = 'integrity_constraint_violation';",
                    hash="c7822d9a064920b015164aa8e6c7fa23deddc696",
                    operation='UPDATE OF "id", "session_id", "parent_id"',
                    pgid="pgtrigger_protect_message_tree_20d65",
                    table="assistant_messages",
                    when="BEFORE",
                ),
            ),
        ),
        AddTrigger(
            model_name="message",
            trigger=pgtrigger.compiler.Trigger(
                name="count_inserted_messages",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="\n    UPDATE assistant_sessions AS s SET message_count = greatest(s.message_count + n.c, 0),\n        updated_at = clock_timestamp()\n    FROM (SELECT session_id, count(*) AS c FROM new_messages GROUP BY session_id) AS n WHERE s.id = n.session_id;\n    RETURN NULL;\n",
                    hash="4dbf48c9ee88618faec7fa26f15268aa9cf1b65c",
                    level="STATEMENT",
                    operation="INSERT",
                    pgid="pgtrigger_count_inserted_messages_cf7ea",
                    referencing="REFERENCING NEW TABLE AS new_messages ",
                    table="assistant_messages",
                    when="AFTER",
                ),
            ),
        ),
        AddTrigger(
            model_name="message",
            trigger=pgtrigger.compiler.Trigger(
                name="count_deleted_messages",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="\n    UPDATE assistant_sessions AS s SET message_count = greatest(s.message_count - n.c, 0),\n        updated_at = clock_timestamp()\n    FROM (SELECT session_id, count(*) AS c FROM old_messages GROUP BY session_id) AS n WHERE s.id = n.session_id;\n    RETURN NULL;\n",
                    hash="c4efc29e1fca2632d117606b7dcb07302f2e52a8",
                    level="STATEMENT",
                    operation="DELETE",
                    pgid="pgtrigger_count_deleted_messages_9b7d6",
                    referencing="REFERENCING OLD TABLE AS old_messages ",
                    table="assistant_messages",
                    when="AFTER",
                ),
            ),
        ),
        AddTrigger(
            model_name="sessionrecord",
            trigger=pgtrigger.compiler.Trigger(
                name="cascade_session_delete",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="\n    DELETE FROM assistant_messages AS t USING old_sessions AS o WHERE o.id <> '' AND t.session_id = o.id;\n    DELETE FROM assistant_compactions AS t USING old_sessions AS o WHERE o.id <> '' AND t.session_id = o.id;\n    DELETE FROM agent_sessions_compaction_jobs AS t USING old_sessions AS o\n        WHERE o.id <> '' AND t.session_id = o.id;\n    DELETE FROM cf_agents_context_blocks AS t USING old_sessions AS o\n        WHERE o.id <> '' AND right(t.label, length(o.id) + 1) = '_' || o.id;\n    DELETE FROM cf_agents_search_entries AS t USING old_sessions AS o\n        WHERE o.id <> '' AND right(t.label, length(o.id) + 1) = '_' || o.id;\n    RETURN NULL;\n",
                    hash="e7a6e55e40c563c4bdc382db5e2e1a7cae4cdc04",
                    level="STATEMENT",
                    operation="DELETE",
                    pgid="pgtrigger_cascade_session_delete_5b79f",
                    referencing="REFERENCING OLD TABLE AS old_sessions ",
                    table="assistant_sessions",
                    when="AFTER",
                ),
            ),
        ),
        AddTrigger(
            model_name="sessionrecord",
            trigger=pgtrigger.compiler.Trigger(
                name="count_existing_messages",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="NEW.message_count := (SELECT count(*) FROM assistant_messages WHERE session_id = NEW.id); RETURN NEW;",
                    hash="5cc25a217643042c7eabfa80a4eeb224f78e4f4d",
                    operation="INSERT",
                    pgid="pgtrigger_count_existing_messages_cc79d",
                    table="assistant_sessions",
                    when="BEFORE",
                ),
            ),
        ),
        migrations.RunPython(install_sqlite_triggers, uninstall_sqlite_triggers, elidable=False),
    ]
