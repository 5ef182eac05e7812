"""An owner column on the label-keyed tables, filled for existing rows; the delete cascade follows it.

``cf_agents_context_blocks`` and ``cf_agents_search_entries`` get a nullable ``session_id``
(indexed): the session that owns the row, NULL when no owner is known (the seed's providers
and other programs still insert without it).  Keys ``<label>_<session id>`` are ambiguous
(``memory_user_X`` reads as session ``user_X`` or ``X``), so per-session operations now find a
session's rows by this column, never by a key suffix.

The backfill gives an existing row the registered session (``assistant_sessions.id``) its key
reads as ``<label>_<id>`` of, with a non-empty label; when several do, the longest id wins
(``manage.py check --database default`` lists those rows, warning ``agent_sessions.W030``).
The bare ``_system_prompt`` is the default namespace's prompt and stays ownerless.
The session-delete triggers then delete a session's owned rows and its ownerless stored prompt
(exact key ``_system_prompt_<id>``) only.  Every statement is written out here, per vendor.
"""

import json

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations, models
from django.db.models import options

BLOCKS = "cf_agents_context_blocks"
ENTRIES = "cf_agents_search_entries"
CHUNK = 500

ADD_COLUMNS = [
    "ALTER TABLE cf_agents_context_blocks ADD COLUMN session_id text NULL",
    "ALTER TABLE cf_agents_search_entries ADD COLUMN session_id text NULL",
    "CREATE INDEX cf_agents_blocks_owner_idx ON cf_agents_context_blocks (session_id)",
    "CREATE INDEX cf_agents_entries_owner_idx ON cf_agents_search_entries (session_id)",
]
DROP_COLUMNS = [
    "DROP INDEX cf_agents_blocks_owner_idx",
    "DROP INDEX cf_agents_entries_owner_idx",
    "ALTER TABLE cf_agents_context_blocks DROP COLUMN session_id",
    "ALTER TABLE cf_agents_search_entries DROP COLUMN session_id",
]

_CASCADE_HEAD = """CREATE TRIGGER IF NOT EXISTS agent_sessions_cascade_session_delete
    AFTER DELETE ON assistant_sessions WHEN OLD.id <> '' BEGIN
        DELETE FROM assistant_messages WHERE session_id = OLD.id;
        DELETE FROM assistant_compactions WHERE session_id = OLD.id;
        DELETE FROM agent_sessions_compaction_jobs WHERE session_id = OLD.id;
"""
SQLITE_CASCADE_BY_OWNER = (
    _CASCADE_HEAD
    + """        DELETE FROM cf_agents_context_blocks WHERE session_id = OLD.id;
        DELETE FROM cf_agents_context_blocks WHERE session_id IS NULL AND label = '_system_prompt_' || OLD.id;
        DELETE FROM cf_agents_search_entries WHERE session_id = OLD.id;
    END"""
)
SQLITE_CASCADE_BY_SUFFIX = (
    _CASCADE_HEAD
    + """        DELETE FROM cf_agents_context_blocks WHERE substr(label, -(length(OLD.id) + 1)) = '_' || OLD.id;
        DELETE FROM cf_agents_search_entries WHERE substr(label, -(length(OLD.id) + 1)) = '_' || OLD.id;
    END"""
)
_SQLITE_DROP_CASCADE = "DROP TRIGGER IF EXISTS agent_sessions_cascade_session_delete"

_PG_HEAD = """
    DELETE FROM assistant_messages AS t USING old_sessions AS o WHERE o.id <> '' AND t.session_id = o.id;
    DELETE FROM assistant_compactions AS t USING old_sessions AS o WHERE o.id <> '' AND t.session_id = o.id;
    DELETE FROM agent_sessions_compaction_jobs AS t USING old_sessions AS o
        WHERE o.id <> '' AND t.session_id = o.id;
"""
PG_CASCADE_BY_OWNER = (
    _PG_HEAD
    + """    DELETE FROM cf_agents_context_blocks AS t USING old_sessions AS o
        WHERE o.id <> '' AND t.session_id = o.id;
    DELETE FROM cf_agents_context_blocks AS t USING old_sessions AS o
        WHERE o.id <> '' AND t.session_id IS NULL AND t.label = '_system_prompt_' || o.id;
    DELETE FROM cf_agents_search_entries AS t USING old_sessions AS o
        WHERE o.id <> '' AND t.session_id = o.id;
    RETURN NULL;
"""
)
PG_CASCADE_BY_SUFFIX = (
    _PG_HEAD
    + """    DELETE FROM cf_agents_context_blocks AS t USING old_sessions AS o
        WHERE o.id <> '' AND right(t.label, length(o.id) + 1) = '_' || o.id;
    DELETE FROM cf_agents_search_entries AS t USING old_sessions AS o
        WHERE o.id <> '' AND right(t.label, length(o.id) + 1) = '_' || o.id;
    RETURN NULL;
"""
)


def _cascade(func: str, hash: str) -> pgtrigger.compiler.Trigger:
    return pgtrigger.compiler.Trigger(
        name="cascade_session_delete",
        sql=pgtrigger.compiler.UpsertTriggerSql(
            func=func,
            hash=hash,
            level="STATEMENT",
            operation="DELETE",
            pgid="pgtrigger_cascade_session_delete_5b79f",
            referencing="REFERENCING OLD TABLE AS old_sessions ",
            table="assistant_sessions",
            when="AFTER",
        ),
    )


class ReplacePgTrigger(migrations.operations.base.Operation):
    """Install a new version of a django-pgtrigger trigger in place (Postgres; pgtrigger's install replaces).

    It enters the migration state only when pgtrigger's ``Meta.triggers`` is loaded, so
    projects without ``"pgtrigger"`` in INSTALLED_APPS migrate the same.
    """

    reversible = True

    def __init__(self, model_name, old, new):
        self.model_name, self.old, self.new = model_name, old, new

    def deconstruct(self):
        return (self.__class__.__name__, [], {"model_name": self.model_name, "old": self.old, "new": self.new})

    def state_forwards(self, app_label, state):
        if "triggers" not in options.DEFAULT_NAMES:
            return
        model_state = state.models[app_label, self.model_name]
        triggers = model_state.options.get("triggers", [])
        model_state.options["triggers"] = [self.new if t.name == self.new.name else t for t in triggers]
        state.reload_model(app_label, self.model_name, delay=True)

    def _install(self, trigger, app_label, schema_editor, from_state, to_state):
        add = pgtrigger.migrations.AddTrigger(self.model_name, trigger)
        add.database_forwards(app_label, schema_editor, from_state, to_state)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        self._install(self.new, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        self._install(self.old, app_label, schema_editor, from_state, to_state)

    def describe(self):
        return f"Replace trigger {self.new.name} on model {self.model_name}"


def _candidates(key):
    """Ids ``i`` for which ``key`` reads ``<label>_<i>`` with a non-empty label, longest first."""
    if key == "_system_prompt":
        return []
    return [key[i + 1 :] for i in range(1, len(key) - 1) if key[i] == "_"]


# Registered ids among a JSON array of candidates, per vendor.
REGISTERED = {
    "sqlite": "SELECT id FROM assistant_sessions WHERE id IN (SELECT value FROM json_each(%s))",
    "postgresql": "SELECT id FROM assistant_sessions WHERE id IN (SELECT jsonb_array_elements_text(%s::jsonb))",
}
# The next ownerless labels of a table after a given one (keyset order), and their backfill.
NEXT_LABELS = {
    BLOCKS: "SELECT label FROM cf_agents_context_blocks WHERE session_id IS NULL AND label > %s "
    "ORDER BY label LIMIT %s",
    ENTRIES: "SELECT DISTINCT label FROM cf_agents_search_entries WHERE session_id IS NULL AND label > %s "
    "ORDER BY label LIMIT %s",
}
SET_OWNER = {
    BLOCKS: "UPDATE cf_agents_context_blocks SET session_id = %s WHERE label = %s AND session_id IS NULL",
    ENTRIES: "UPDATE cf_agents_search_entries SET session_id = %s WHERE label = %s AND session_id IS NULL",
}


def _owners(cursor, vendor, labels):
    """``{label: owner}``: the longest registered id among each label's candidates."""
    wanted = sorted({c for label in labels for c in _candidates(label)})
    registered = set()
    for start in range(0, len(wanted), CHUNK):
        cursor.execute(REGISTERED[vendor], [json.dumps(wanted[start : start + CHUNK])])
        registered.update(row[0] for row in cursor.fetchall())
    found = {}
    for label in labels:
        owner = next((c for c in _candidates(label) if c in registered), None)
        if owner is not None:
            found[label] = owner
    return found


def _fill(cursor, vendor, table):
    """Backfill ``table``'s ownerless rows, a chunk of labels at a time."""
    after = ""
    while True:
        cursor.execute(NEXT_LABELS[table], [after, CHUNK])
        labels = [row[0] for row in cursor.fetchall()]
        if not labels:
            return
        after = labels[-1]
        owners = _owners(cursor, vendor, labels)
        if owners:
            cursor.executemany(SET_OWNER[table], [(owner, label) for label, owner in owners.items()])


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor not in {"sqlite", "postgresql"}:
        return
    with schema_editor.connection.cursor() as cursor:
        for statement in ADD_COLUMNS:
            cursor.execute(statement)
        _fill(cursor, vendor, BLOCKS)
        _fill(cursor, vendor, ENTRIES)
        if vendor == "sqlite":
            cursor.execute(_SQLITE_DROP_CASCADE)
            cursor.execute(SQLITE_CASCADE_BY_OWNER)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor not in {"sqlite", "postgresql"}:
        return
    with schema_editor.connection.cursor() as cursor:
        if vendor == "sqlite":
            cursor.execute(_SQLITE_DROP_CASCADE)
            cursor.execute(SQLITE_CASCADE_BY_SUFFIX)
        for statement in DROP_COLUMNS:
            cursor.execute(statement)


_HELP = "The owning session (NULL: no known owner, e.g. a foreign writer's row)."


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0027_postgres_window_function")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="contextblockrecord",
                    name="session_id",
                    field=models.TextField(blank=True, help_text=_HELP, null=True),
                ),
                migrations.AddField(
                    model_name="searchentry",
                    name="session_id",
                    field=models.TextField(blank=True, help_text=_HELP, null=True),
                ),
                migrations.AddIndex(
                    model_name="contextblockrecord",
                    index=models.Index(fields=["session_id"], name="cf_agents_blocks_owner_idx"),
                ),
                migrations.AddIndex(
                    model_name="searchentry",
                    index=models.Index(fields=["session_id"], name="cf_agents_entries_owner_idx"),
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
        ),
        ReplacePgTrigger(
            model_name="sessionrecord",
            old=_cascade(PG_CASCADE_BY_SUFFIX, "e7a6e55e40c563c4bdc382db5e2e1a7cae4cdc04"),
            new=_cascade(PG_CASCADE_BY_OWNER, "5f5783dab65895f9d18c9d4cd286d0aecde01984"),
        ),
    ]
