"""Postgres: drop ``assistant_sessions``' ``text_pattern_ops`` index on ``id``.

Django adds it beside a text primary key for ``LIKE 'prefix%'`` lookups, which nothing here
makes (the admin's search is ``icontains``, which it cannot serve).  Each append updates its
session's row (count and ``updated_at``), and that update writes an entry into every index of
the table: one of four was this one.  The model is unchanged, so the migration state is too.
"""

from django.db import migrations

from agent_sessions.schema import drop_session_id_pattern_index, restore_session_id_pattern_index


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0021_postgres_append_counts_its_row")]

    operations = [
        migrations.RunPython(drop_session_id_pattern_index, restore_session_id_pattern_index, elidable=False)
    ]
