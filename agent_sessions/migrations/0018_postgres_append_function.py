"""Postgres: an append is one call of the PL/pgSQL function ``agent_sessions_append``.

The function keeps the append's plans per connection once the table's statistics can be
trusted (planning was a quarter of an append); see ``storage.postgres_append``.  SQLite is
unchanged: its driver caches the statement.
"""

from django.db import migrations

from agent_sessions.storage import postgres_append


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0017_sqlite_deferred_index")]

    operations = [migrations.RunPython(postgres_append.reinstall_uncounted, postgres_append.uninstall, elidable=False)]
