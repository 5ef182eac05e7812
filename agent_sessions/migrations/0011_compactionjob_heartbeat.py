"""Compaction job lease holder, heartbeat and publish time (recoverable jobs, see docs/operations.md)."""

from django.db import migrations, models

from agent_sessions.schema import install_sqlite_triggers, uninstall_sqlite_triggers


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0010_session_keys")]

    operations = [
        # SQLite rebuilds the jobs table to add a NOT NULL column; the session-delete trigger
        # (0008) names that table, so it is taken down around the rebuild.
        migrations.RunPython(uninstall_sqlite_triggers, install_sqlite_triggers, elidable=False),
        migrations.AddField(
            model_name="compactionjob",
            name="holder",
            field=models.TextField(
                blank=True,
                default="",
                help_text="Who runs it: host:pid:start-time:task (empty when no run holds the lease).",
            ),
        ),
        migrations.AddField(
            model_name="compactionjob",
            name="heartbeat_at",
            field=models.DateTimeField(blank=True, null=True, help_text="Last sign of life of the running holder."),
        ),
        migrations.AddField(
            model_name="compactionjob",
            name="enqueued_at",
            field=models.DateTimeField(
                blank=True,
                null=True,
                help_text="When the pending request reached the broker (empty: not published yet).",
            ),
        ),
        migrations.RunPython(install_sqlite_triggers, uninstall_sqlite_triggers, elidable=False),
    ]
