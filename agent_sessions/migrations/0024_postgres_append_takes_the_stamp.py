"""Postgres: the append function takes the registry's stamp (``p_stamp``, null by default).

SessionManager sets a registered session's ``updated_at`` with its own clock at each append.
That was a second statement after the call: a second update of the registry row the function
had just counted, and with server-bound parameters two more round trips (BEGIN and COMMIT).
The function's own count now sets the stamp.  The function without the argument is dropped
(with both, a call without the stamp would be ambiguous); code that predates this migration
still calls it, the stamp then taking its default.  Going back restores the function as 0023
left it.
"""

from django.db import migrations

from agent_sessions.storage import postgres_append


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0023_postgres_append_remembers_its_mode")]

    operations = [
        migrations.RunPython(postgres_append.reinstall, postgres_append.reinstall_unstamped, elidable=False)
    ]
