"""Database triggers: a session delete cascades to its rows; a stored message cannot move in the tree.

Triggers, not Django's collector, because the tables are shared with foreign
writers and raw SQL: a ``DELETE FROM assistant_sessions`` from anywhere leaves
no orphans, and an ``UPDATE`` that would re-parent or re-key a message fails
whoever issues it.  On Postgres they are django-pgtrigger triggers (installed
by the app's migrations, listed by ``manage.py pgtrigger ls``); SQLite gets the same
behaviour from the initial migration's own ``CREATE TRIGGER`` statements (migrations/_frozen_sql.py).
See docs/data-model.md.
"""

from __future__ import annotations

import pgtrigger

TREE_ERROR = "agent_sessions: the id, session_id and parent_id of a stored message never change"
"""The error text of a refused update (IntegrityError on both databases)."""

# A session's rows of the label-keyed tables are those it owns (their session_id column),
# and an ownerless stored prompt under its exact key "_system_prompt_<session id>"; never
# a suffix match (see storage/owners.py).  The default namespace '' never cascades.
_PG_CASCADE = """
    DELETE FROM assistant_messages AS t USING old_sessions AS o WHERE o.id <> '' AND t.session_id = o.id;
    DELETE FROM assistant_compactions AS t USING old_sessions AS o WHERE o.id <> '' AND t.session_id = o.id;
    DELETE FROM agent_sessions_compaction_jobs AS t USING old_sessions AS o
        WHERE o.id <> '' AND t.session_id = o.id;
    DELETE FROM cf_agents_context_blocks AS t USING old_sessions AS o
        WHERE o.id <> '' AND t.session_id = o.id;
    DELETE FROM cf_agents_context_blocks AS t USING old_sessions AS o
        WHERE o.id <> '' AND t.session_id IS NULL AND t.label = '_system_prompt_' || o.id;
    DELETE FROM cf_agents_search_entries AS t USING old_sessions AS o
        WHERE o.id <> '' AND t.session_id = o.id;
    RETURN NULL;
"""

cascade_session_delete = pgtrigger.Trigger(
    name="cascade_session_delete",
    level=pgtrigger.Statement,
    when=pgtrigger.After,
    operation=pgtrigger.Delete,
    referencing=pgtrigger.Referencing(old="old_sessions"),
    func=_PG_CASCADE,
)
"""On ``assistant_sessions``: one statement per table, whatever the number of sessions deleted."""

protect_message_tree = pgtrigger.Trigger(
    name="protect_message_tree",
    when=pgtrigger.Before,
    operation=pgtrigger.UpdateOf("id", "session_id", "parent_id"),
    condition=pgtrigger.Condition(
        "OLD.id IS DISTINCT FROM NEW.id OR OLD.session_id IS DISTINCT FROM NEW.session_id "
        "OR OLD.parent_id IS DISTINCT FROM NEW.parent_id"
    ),
    func=f"RAISE EXCEPTION '{TREE_ERROR}' USING ERRCODE = 'integrity_constraint_violation';",
)
"""On ``assistant_messages``: depth and path_tokens stay writable (the library re-derives them)."""

# ``assistant_sessions.message_count`` and ``updated_at`` follow inserts and deletes of
# messages, whoever writes them (one UPDATE per statement).  clock_timestamp(), not
# now(): several appends in one transaction still order the sessions they touched.
# greatest(): the stamp never moves back, so a stamp the registry wrote with its own
# clock (manager/clock.py, possibly ahead of the database's) is never undercut.
_PG_NEWEST = "greatest(s.updated_at, clock_timestamp())"
_PG_STAMP = f"updated_at = {_PG_NEWEST}"
_PG_COUNT = (
    "\n    UPDATE assistant_sessions AS s SET message_count = greatest(s.message_count {sign} n.c, 0),\n"
    f"        {_PG_STAMP}\n"
    "    FROM (SELECT session_id, count(*) AS c FROM {rows} GROUP BY session_id) AS n WHERE s.id = n.session_id;\n"
    "    RETURN NULL;\n"
)

COUNTED_BY_APPEND = "agent_sessions.counted_by_append"
"""A setting the append function (storage/postgres_append.py) turns ``on`` for its own call only:
it counts its one row itself (:func:`count_one_sql`), and the insert trigger stands aside.  The
trigger's work (a PL/pgSQL call, a scan and a grouping of the statement's new rows, a join) was
about a fifth of the server's time in an append; the WHEN clause that skips it costs nothing
measurable.  Every other insert (a bulk append, a fork, raw SQL) is counted by the trigger."""

count_inserted_messages = pgtrigger.Trigger(
    name="count_inserted_messages",
    level=pgtrigger.Statement,
    when=pgtrigger.After,
    operation=pgtrigger.Insert,
    referencing=pgtrigger.Referencing(new="new_messages"),
    condition=pgtrigger.Condition(f"current_setting('{COUNTED_BY_APPEND}', true) IS DISTINCT FROM 'on'"),
    func=_PG_COUNT.format(sign="+", rows="new_messages"),
)
"""On ``assistant_messages``: appends raise their session's count and ``updated_at``."""


def count_one_sql(session: str, stamp: str | None = None) -> str:
    """What :data:`count_inserted_messages` does for one new row of the session ``session`` (an SQL
    expression): the append function's own count, under :data:`COUNTED_BY_APPEND`.  ``stamp``: an
    SQL expression that, when not null, is the ``updated_at`` to set instead (the registry's own)."""
    stamped = _PG_STAMP if stamp is None else f"updated_at = coalesce({stamp}, {_PG_NEWEST})"
    return f"UPDATE assistant_sessions AS s SET message_count = s.message_count + 1, {stamped} WHERE s.id = {session}"


count_deleted_messages = pgtrigger.Trigger(
    name="count_deleted_messages",
    level=pgtrigger.Statement,
    when=pgtrigger.After,
    operation=pgtrigger.Delete,
    referencing=pgtrigger.Referencing(old="old_messages"),
    func=_PG_COUNT.format(sign="-", rows="old_messages"),
)
"""On ``assistant_messages``: deletes lower it."""

count_existing_messages = pgtrigger.Trigger(
    name="count_existing_messages",
    when=pgtrigger.Before,
    operation=pgtrigger.Insert,
    func="NEW.message_count := (SELECT count(*) FROM assistant_messages WHERE session_id = NEW.id); RETURN NEW;",
)
"""On ``assistant_sessions``: a registry row made for a session that already has messages starts with their count."""
