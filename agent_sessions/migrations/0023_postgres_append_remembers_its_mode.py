"""Postgres: the append function remembers, per connection, that its table keeps plans.

Deciding it was a catalog query at every call (5-9 % of the server's time in an append); the
function now keeps the answer in the connection's setting ``agent_sessions.append_mode``,
stamped with the table it was found for (``storage.postgres_plans.STAMP``).  The function is
installed again from the code; going back leaves it as it is (its signature is unchanged, and
the earlier migrations install the same code's body).
"""

from django.db import migrations

from agent_sessions.storage import postgres_append


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0022_drop_session_id_like_index")]

    operations = [migrations.RunPython(postgres_append.reinstall_unstamped, migrations.RunPython.noop, elidable=False)]
