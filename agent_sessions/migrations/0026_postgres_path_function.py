"""Postgres: the path's range read as a function, ``agent_sessions_path``.

``get_history`` (and ``get_raw_path``) sent the range read of a session that does not branch
as a statement, planned at every call: 0.45 ms against 0.25 ms for a 10-message path.  The
function runs the same statement with its plan kept per connection
(``storage.postgres_reads``).  Going back drops it; reads then send the statement again.
"""

from django.db import migrations

from agent_sessions.storage import postgres_reads


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0025_postgres_recent_window_function")]

    operations = [migrations.RunPython(postgres_reads.install_path, postgres_reads.uninstall_path, elidable=False)]
