"""Tool inputs, outputs, errors and reasoning become searchable: ``assistant_messages.tool_text``.

The column defaults to '' so foreign writers can ignore it; existing rows are filled
from their stored JSON; the search indexes (FTS5 tables on SQLite, ``content_tsv`` and
a trigram index on Postgres) cover it with a lower weight than ``text_content``.
"""

from django.db import migrations, models

from agent_sessions.storage.search_schema import install_tool_text, uninstall_tool_text


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0008_session_triggers")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="message",
                    name="tool_text",
                    field=models.TextField(blank=True, db_default="", default=""),
                ),
            ],
            database_operations=[migrations.RunPython(install_tool_text, uninstall_tool_text, elidable=False)],
        ),
    ]
