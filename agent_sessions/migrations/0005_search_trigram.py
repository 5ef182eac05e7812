# Substring search for CJK text: FTS5 trigram tables (SQLite) / pg_trgm GIN indexes (Postgres).

from django.db import migrations

from agent_sessions.storage.search_schema import install_trigram, uninstall_trigram


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0004_apikey'),
    ]

    operations = [
        migrations.RunPython(install_trigram, uninstall_trigram, elidable=False),
    ]
