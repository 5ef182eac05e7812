"""Postgres: a budgeted window's first read in one round trip, ``agent_sessions_window``.

Without a hint of the window's size (a process's first read of it), ``get_recent_history``
read ``min_recent + 8`` rows and then read on: two calls, 1.41x a hinted read.  The function
returns the newest rows one by one and stops at the first past the budget, in one call
(``storage.postgres_reads``).  Going back drops it; first reads then
read on again.
"""

from django.db import migrations

from agent_sessions.storage import postgres_reads


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0026_postgres_path_function")]

    operations = [migrations.RunPython(postgres_reads.install_window, postgres_reads.uninstall_window, elidable=False)]
