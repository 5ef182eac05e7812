"""An expression index for the path walk's parent lookup (see storage.walks.PATH_KEY).

The same DDL on SQLite and Postgres; ``IF NOT EXISTS`` so a database laid out
by hand or migrated twice is fine.
"""

from django.db import migrations

INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS assistant_msg_path_key ON assistant_messages "
    "((CAST(length(session_id) AS TEXT) || ':' || session_id || id))"
)


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0005_search_trigram")]

    operations = [
        migrations.RunSQL(INDEX, "DROP INDEX IF EXISTS assistant_msg_path_key"),
    ]
