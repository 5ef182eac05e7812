"""Postgres: the words' GIN index keyed by (session_id, content_tsv), so per-session search stays flat."""

from django.db import migrations

from agent_sessions.storage.search_schema import install_session_fts, uninstall_session_fts


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0011_compactionjob_heartbeat")]

    operations = [migrations.RunPython(install_session_fts, uninstall_session_fts, elidable=False)]
