"""The admin's own permissions on sessions: export their content, compact now (state only: no SQL)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0002_model_calls")]

    operations = [
        migrations.AlterModelOptions(
            name="sessionrecord",
            options={
                "ordering": ["-updated_at"],
                "verbose_name": "session",
                "permissions": [
                    ("export_sessionrecord", "Can export session content"),
                    ("compact_sessionrecord", "Can compact a session now"),
                ],
            },
        ),
    ]
