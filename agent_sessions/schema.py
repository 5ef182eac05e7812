"""Migration operations that lay out the seed's tables, or adopt them when they already exist.

A database first laid out by the seed's Postgres DDL already has the tables;
``AdoptOrCreateModel`` then adds only this app's extra columns and indexes
instead of failing on ``CREATE TABLE``.
"""

from __future__ import annotations

import pgtrigger.migrations
from django.db import migrations
from django.db.models import options

from .storage import backends, sqlite
from .storage.ddl import BOTH, SQLITE, run_on


class AdoptOrCreateModel(migrations.CreateModel):
    """``CreateModel`` that adopts an existing table of the same name (Postgres)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.name)
        connection = schema_editor.connection
        table = model._meta.db_table
        if connection.vendor == "postgresql" and table in connection.introspection.table_names():
            from .storage import postgres

            for statement in postgres.ADOPT.get(table, []):
                schema_editor.execute(statement)
            return
        super().database_forwards(app_label, schema_editor, from_state, to_state)


def install_search(apps, schema_editor) -> None:
    """Create the vendor's full-text search structures (FTS5 tables or tsvector columns)."""
    run_on(schema_editor, BOTH, lambda vendor: backends.for_vendor(vendor).install_sql())


def uninstall_search(apps, schema_editor) -> None:
    """Reverse of :func:`install_search`."""
    run_on(schema_editor, BOTH, lambda vendor: backends.for_vendor(vendor).UNINSTALL)


class AddTrigger(pgtrigger.migrations.AddTrigger):
    """django-pgtrigger's ``AddTrigger`` (Postgres only), also usable without ``"pgtrigger"`` in INSTALLED_APPS.

    The trigger is installed either way; it enters the migration state only when
    pgtrigger's ``Meta.triggers`` support is loaded (it is what reads that state).
    """

    def state_forwards(self, app_label, state) -> None:
        if "triggers" in options.DEFAULT_NAMES:
            super().state_forwards(app_label, state)


def install_sqlite_triggers(apps, schema_editor) -> None:
    """SQLite's own copy of the triggers that AddTrigger installs on Postgres."""
    run_on(schema_editor, SQLITE, lambda _: sqlite.trigger_install_sql())


def uninstall_sqlite_triggers(apps, schema_editor) -> None:
    """Reverse of :func:`install_sqlite_triggers`."""
    run_on(schema_editor, SQLITE, lambda _: sqlite.TRIGGER_UNINSTALL)


# The path walk's key (see storage.walks.PATH_KEY) with session_id as a column of
# its own, so the unique index is allowed on a table partitioned by session_id.
PATH_KEY_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS assistant_msg_path_key ON assistant_messages "
    "((CAST(length(session_id) AS TEXT) || ':' || session_id || id), session_id)"
)
_PATH_KEY_INDEX_0006 = (
    "CREATE UNIQUE INDEX IF NOT EXISTS assistant_msg_path_key ON assistant_messages "
    "((CAST(length(session_id) AS TEXT) || ':' || session_id || id))"
)


def upgrade_keys(apps, schema_editor) -> None:
    """Make every key of the growing tables include session_id (in place, rows untouched)."""
    vendor = schema_editor.connection.vendor
    if vendor not in BOTH:
        return
    with schema_editor.connection.cursor() as cursor:
        backends.for_vendor(vendor).upgrade_keys(cursor, PATH_KEY_INDEX)


def downgrade_keys(apps, schema_editor) -> None:
    """Reverse of :func:`upgrade_keys`."""
    vendor = schema_editor.connection.vendor
    if vendor not in BOTH:
        return
    with schema_editor.connection.cursor() as cursor:
        backends.for_vendor(vendor).downgrade_keys(cursor, _PATH_KEY_INDEX_0006)


class ReplaceTrigger(migrations.operations.base.Operation):
    """Swap a django-pgtrigger trigger for a new version of the same name (Postgres), in place.

    pgtrigger installs a trigger as ``CREATE OR REPLACE FUNCTION`` plus drop-and-create, so
    installing ``new`` replaces ``old`` (and installing ``old`` undoes it) without reading
    the migration state: like :class:`AddTrigger`, this works without ``"pgtrigger"`` in
    INSTALLED_APPS, and it enters the state only when pgtrigger's ``Meta.triggers`` is loaded.
    """

    reversible = True

    def __init__(self, model_name: str, old, new) -> None:
        self.model_name = model_name
        self.old = old
        self.new = new

    def deconstruct(self):
        return (self.__class__.__name__, [], {"model_name": self.model_name, "old": self.old, "new": self.new})

    def state_forwards(self, app_label, state) -> None:
        if "triggers" not in options.DEFAULT_NAMES:
            return
        model_state = state.models[app_label, self.model_name]
        triggers = model_state.options.get("triggers", [])
        model_state.options["triggers"] = [self.new if t.name == self.new.name else t for t in triggers]
        state.reload_model(app_label, self.model_name, delay=True)

    def database_forwards(self, app_label, schema_editor, from_state, to_state) -> None:
        AddTrigger(self.model_name, self.new).database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state) -> None:
        AddTrigger(self.model_name, self.old).database_forwards(app_label, schema_editor, from_state, to_state)

    def describe(self) -> str:
        return f"Replace trigger {self.new.name} on model {self.model_name}"


def _on_postgres(schema_editor, step: str, *args) -> None:
    """Run the Postgres backend's ``step(cursor, *args)`` on the migrated database; nothing elsewhere."""
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            getattr(backends.for_vendor("postgresql"), step)(cursor, *args)


def drop_duplicate_seq_index(apps, schema_editor) -> None:
    """Postgres: drop the ``(session_id, seq)`` index where the primary key is that same btree."""
    _on_postgres(schema_editor, "drop_duplicate_seq_index")


def restore_seq_index(apps, schema_editor) -> None:
    """Reverse of :func:`drop_duplicate_seq_index`."""
    _on_postgres(schema_editor, "restore_seq_index")


def drop_session_id_pattern_index(apps, schema_editor) -> None:
    """Postgres: drop the ``text_pattern_ops`` index Django made beside the session table's text key."""
    _on_postgres(schema_editor, "drop_session_id_pattern_index")


def restore_session_id_pattern_index(apps, schema_editor) -> None:
    """Reverse of :func:`drop_session_id_pattern_index`, under Django's own name for it."""
    name = schema_editor._create_index_name("assistant_sessions", ["id"], suffix="_like")
    _on_postgres(schema_editor, "restore_session_id_pattern_index", name)
