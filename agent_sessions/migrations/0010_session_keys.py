"""Partition-safe keys: every key of assistant_messages / assistant_compactions includes session_id.

On PostgreSQL the primary keys become ``(session_id, seq)`` (``seq`` keeps its
identity default and a plain index for Django's pk lookups), the compaction id is
unique per session, and the path walk's unique expression index gains session_id
as a column.  SQLite keeps ``seq`` as its rowid.  Rows are not rewritten.
"""

from django.db import migrations, models

from agent_sessions.schema import downgrade_keys, install_sqlite_triggers, uninstall_sqlite_triggers, upgrade_keys


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0009_message_tool_text")]

    operations = [
        migrations.RunPython(upgrade_keys, downgrade_keys, elidable=False),
        # SQLite rebuilds assistant_compactions for the AlterField below; its triggers (0008)
        # name that table, so they are taken down around the rebuild and put back after it.
        migrations.RunPython(uninstall_sqlite_triggers, install_sqlite_triggers, elidable=False),
        migrations.AlterField(
            model_name="compaction",
            name="compaction_id",
            field=models.TextField(db_column="id"),
        ),
        migrations.AddConstraint(
            model_name="compaction",
            constraint=models.UniqueConstraint(
                fields=("session_id", "compaction_id"), name="assistant_compactions_session_id_uniq"
            ),
        ),
        migrations.RunPython(install_sqlite_triggers, uninstall_sqlite_triggers, elidable=False),
    ]
