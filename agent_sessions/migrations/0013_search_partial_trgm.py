"""Postgres: the text trigram index only over rows with a non-ASCII character (English appends skip it)."""

from django.db import migrations

from agent_sessions.storage.search_schema import install_partial_trigram, uninstall_partial_trigram


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0012_search_session_fts")]

    operations = [migrations.RunPython(install_partial_trigram, uninstall_partial_trigram, elidable=False)]
