"""ORM relations from messages, compactions and compaction jobs to their session.

State only: the ``session_id`` columns stay exactly as they are (no foreign key
constraint, no new index), so foreign writers and rows of sessions without a
registry row keep working.
"""

import django.db.models.deletion
from django.db import migrations, models


def _relation(related_name):
    return models.ForeignKey(
        db_column="session_id",
        db_constraint=False,
        db_default="",
        db_index=False,
        default="",
        on_delete=django.db.models.deletion.DO_NOTHING,
        related_name=related_name,
        to="agent_sessions.sessionrecord",
    )


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0006_path_key_index")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="message", name="session_id"),
                migrations.AddField(model_name="message", name="session", field=_relation("messages")),
                migrations.RemoveField(model_name="compaction", name="session_id"),
                migrations.AddField(model_name="compaction", name="session", field=_relation("compactions")),
                migrations.RemoveField(model_name="compactionjob", name="session_id"),
                migrations.AddField(
                    model_name="compactionjob",
                    name="session",
                    field=models.OneToOneField(
                        db_column="session_id",
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="compaction_job",
                        to="agent_sessions.sessionrecord",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
