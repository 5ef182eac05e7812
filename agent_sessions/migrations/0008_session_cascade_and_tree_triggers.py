"""Triggers: deleting a session deletes its rows; a stored message cannot be re-keyed or re-parented.

Postgres: django-pgtrigger triggers (see agent_sessions.triggers).  SQLite: the same
behaviour as its own triggers (agent_sessions.storage.sqlite.trigger_install_sql).
"""

import pgtrigger.compiler
from django.db import migrations

from agent_sessions.schema import AddTrigger, install_sqlite_triggers, uninstall_sqlite_triggers


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0007_session_relations")]

    operations = [
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
        migrations.RunPython(install_sqlite_triggers, uninstall_sqlite_triggers, elidable=False),
    ]
