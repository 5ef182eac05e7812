"""Postgres: an append is one call of the PL/pgSQL function ``agent_sessions_append``.

The function keeps the append's plans per connection once the table's statistics can be
trusted (planning was a quarter of an append); see ``storage.postgres_append``.  SQLite is
unchanged: its driver caches the statement.
"""

from django.db import migrations


def _postgres(install):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            from agent_sessions.storage import postgres_append

            for statement in postgres_append.install_sql(counts=False) if install else postgres_append.UNINSTALL:
                schema_editor.execute(statement, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0017_sqlite_deferred_index")]

    operations = [migrations.RunPython(_postgres(True), _postgres(False), elidable=False)]
