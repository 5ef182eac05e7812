"""Postgres: the append function finds the latest leaf without sorting the newest rows.

The latest-leaf probe orders its window of newest rows by the index's own key, so the
function's kept plan probes children one row at a time and stops at the first childless row
(see ``storage.walks``).  The function is installed again from the code; going back leaves it
as it is (its signature is unchanged, and migrations 0018-0019 install the same code's body).
"""

from django.db import migrations

from agent_sessions.storage import postgres_append


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0019_postgres_append_partitions_keep_plans")]

    operations = [migrations.RunPython(postgres_append.reinstall_uncounted, migrations.RunPython.noop, elidable=False)]
