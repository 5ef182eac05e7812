"""Postgres: drop ``assistant_msg_sess_seq``, the same ``(session_id, seq)`` btree as the primary key.

Migration 0010 made ``(session_id, seq)`` the primary key, so the model's index on the same
columns was a second copy that every inserted row paid for.  SQLite keeps it (its primary key
is ``seq``).  The model still declares the index, so the migration state is unchanged.
"""

from django.db import migrations

from agent_sessions.schema import drop_duplicate_seq_index, restore_seq_index


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0015_sqlite_trigram_non_ascii")]

    operations = [migrations.RunPython(drop_duplicate_seq_index, restore_seq_index, elidable=False)]
