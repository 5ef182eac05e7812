"""Postgres: the append function counts its own row.

The function updates its session's ``message_count`` and ``updated_at`` itself, under the
setting ``agent_sessions.counted_by_append``, and the insert-count trigger gains a WHEN clause
that stands aside while it is on (``triggers.COUNTED_BY_APPEND``).

Both change in one transaction: with only one of them, each append would be counted twice or
not at all.  Going back restores both (migrations 0018-0020 install the function without its
count: ``postgres_append.reinstall_uncounted``).
"""

import pgtrigger.compiler
from django.db import migrations

from agent_sessions.schema import ReplaceTrigger
from agent_sessions.storage import postgres_append

_COUNT = (
    "\n    UPDATE assistant_sessions AS s SET message_count = greatest(s.message_count + n.c, 0),\n"
    "        updated_at = greatest(s.updated_at, clock_timestamp())\n"
    "    FROM (SELECT session_id, count(*) AS c FROM new_messages GROUP BY session_id) AS n WHERE s.id = n.session_id;\n"
    "    RETURN NULL;\n"
)


def _count_inserted(condition: str | None, hash: str):
    extra = {"condition": condition} if condition else {}
    return pgtrigger.compiler.Trigger(
        name="count_inserted_messages",
        sql=pgtrigger.compiler.UpsertTriggerSql(
            func=_COUNT,
            hash=hash,
            level="STATEMENT",
            operation="INSERT",
            pgid="pgtrigger_count_inserted_messages_cf7ea",
            referencing="REFERENCING NEW TABLE AS new_messages ",
            table="assistant_messages",
            when="AFTER",
            **extra,
        ),
    )


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0020_postgres_append_leaf_in_index_order")]

    operations = [
        ReplaceTrigger(
            model_name="message",
            old=_count_inserted(None, "b9ac90a8180eae4df621508ebcd2951cb21e4712"),
            new=_count_inserted(
                "WHEN (current_setting('agent_sessions.counted_by_append', true) IS DISTINCT FROM 'on')",
                "a594d7b2f4d5d88505e4d1b4bd9b317ed7794a46",
            ),
        ),
        migrations.RunPython(postgres_append.reinstall_unstamped, postgres_append.reinstall_uncounted, elidable=False),
    ]
