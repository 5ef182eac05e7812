"""Compaction job lease holder, heartbeat and publish time (recoverable jobs, see docs/operations.md)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0006_path_key_index")]

    operations = [
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
    ]
