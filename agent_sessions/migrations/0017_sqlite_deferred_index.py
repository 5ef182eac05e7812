"""SQLite: bulk writes (append_all, fork, import) index and count their rows once, after inserting them.

Adds ``agent_sessions_deferred_index`` and gives the three message insert triggers (both FTS
indexes and the message count) a ``WHEN`` that skips a session named there; a bulk write names
its session only inside its own transaction (see ``storage.sqlite.deferred_indexing``).  Postgres
is unchanged: its tsvector columns are generated and its count trigger is per statement.
"""

from django.db import migrations


def _sqlite(deferrable):
    def run(apps, schema_editor):
        from agent_sessions.storage import ddl, sqlite

        ddl.run_on(schema_editor, ddl.SQLITE, lambda _: sqlite.deferrable_insert_triggers_sql(deferrable=deferrable))

    return run


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0016_drop_duplicate_seq_index")]

    operations = [migrations.RunPython(_sqlite(True), _sqlite(False), elidable=False)]
