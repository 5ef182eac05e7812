"""Postgres: the recent window's read as a function, ``agent_sessions_recent``.

``get_recent_history`` sent its range read as a statement, planned at every call (0.2 ms of
a 0.5 ms read).  The function runs the same statement with its plan kept per connection
(``storage.postgres_reads``).  Going back drops it; reads then send the statement again.
"""

from django.db import migrations

from agent_sessions.storage import postgres_reads


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0024_postgres_append_takes_the_stamp")]

    operations = [migrations.RunPython(postgres_reads.install_recent, postgres_reads.uninstall_recent, elidable=False)]
