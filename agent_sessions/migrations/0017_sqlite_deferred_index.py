"""SQLite: bulk writes (append_all, fork, import) index and count their rows once, after inserting them.

Adds ``agent_sessions_deferred_index`` and gives the three message insert triggers (both FTS
indexes and the message count) a ``WHEN`` that skips a session named there; a bulk write names
its session only inside its own transaction (see ``storage.sqlite.deferred_indexing``).  Postgres
is unchanged: its tsvector columns are generated and its count trigger is per statement.
"""

from django.db import migrations


def _sqlite(deferrable):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            from agent_sessions.storage import sqlite

            for statement in sqlite.deferrable_insert_triggers_sql(deferrable=deferrable):
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0016_drop_duplicate_seq_index")]

    operations = [migrations.RunPython(_sqlite(True), _sqlite(False), elidable=False)]
