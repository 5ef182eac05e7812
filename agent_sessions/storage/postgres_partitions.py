"""Convert a table in place into one hash-partitioned by ``session_id`` (PostgreSQL only).

One table at a time, inside the caller's transaction: a new partitioned table
shaped ``LIKE`` the old one, its partitions, the rows copied over in ``seq``
order, the old table dropped and the new one renamed into its place, then the
old table's constraints, indexes, triggers (with their comments, which
django-pgtrigger reads) and ``seq`` sequence recreated.  Each partition's
index carries the parent index's name plus ``_pNN``, so query plans stay readable.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..exceptions import PartitionError

KEY = "session_id"
TABLES = ("assistant_messages", "assistant_compactions")
BATCH = 100_000
"""Rows per copy statement (one progress step)."""

_INDEX_DEF = re.compile(r"^(CREATE (?:UNIQUE )?INDEX )(\S+)( ON )(?:ONLY )?(\S+)( USING .*)$", re.S)


@dataclass(frozen=True)
class Layout:
    """How a table is laid out now: partitioned by hash of session_id into ``partitions``, or not (0)."""

    partitions: int
    rows: int


def partition_name(table: str, index: int) -> str:
    return f"{table}_p{index:02d}"


def layout(cursor, table: str) -> Layout:
    """The table's current partitioning (0: a plain table) and its row count."""
    cursor.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", [table])
    kind = cursor.fetchone()[0]
    partitions = 0
    if kind == "p":
        cursor.execute(
            "SELECT p.partstrat, pg_get_partkeydef(p.partrelid), "
            "(SELECT count(*) FROM pg_inherits i WHERE i.inhparent = p.partrelid) "
            "FROM pg_partitioned_table p WHERE p.partrelid = %s::regclass",
            [table],
        )
        strategy, keydef, count = cursor.fetchone()
        if strategy != "h" or keydef != f"HASH ({KEY})":
            raise PartitionError(f"{table} is already partitioned by {keydef}; only HASH ({KEY}) is handled here")
        partitions = int(count)
    cursor.execute(f"SELECT count(*) FROM {table}")
    return Layout(partitions=partitions, rows=int(cursor.fetchone()[0]))


def _unsafe_unique_indexes(cursor, table: str) -> list[str]:
    """Unique indexes (constraints included) of ``table`` that do not include session_id."""
    cursor.execute(
        "SELECT i.indexrelid::regclass::text FROM pg_index i "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attname = %s "
        "WHERE i.indrelid = %s::regclass AND i.indisunique AND NOT (a.attnum = ANY (i.indkey))",
        [KEY, table],
    )
    return [r[0] for r in cursor.fetchall()]


def _copy_columns(cursor, table: str) -> list[str]:
    """Columns to copy: all but the generated ones (recomputed by the new table)."""
    cursor.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
        "AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
        [table],
    )
    return [r[0] for r in cursor.fetchall()]


def _definitions(cursor, table: str) -> tuple[list[str], list[str], list[str]]:
    """``(constraints, indexes, triggers)`` of ``table`` as DDL (triggers with their comment)."""
    cursor.execute(
        "SELECT format('ALTER TABLE %%I ADD CONSTRAINT %%I %%s', %s::text, conname, pg_get_constraintdef(oid)) "
        "FROM pg_constraint WHERE conrelid = %s::regclass AND contype IN ('p', 'u', 'x') ORDER BY contype, conname",
        [table, table],
    )
    constraints = [r[0] for r in cursor.fetchall()]
    cursor.execute(
        "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i WHERE i.indrelid = %s::regclass "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid) "
        "ORDER BY i.indexrelid::regclass::text",
        [table],
    )
    indexes = [r[0] for r in cursor.fetchall()]
    cursor.execute(
        "SELECT pg_get_triggerdef(oid), obj_description(oid, 'pg_trigger'), tgname FROM pg_trigger "
        "WHERE tgrelid = %s::regclass AND NOT tgisinternal ORDER BY tgname",
        [table],
    )
    triggers = []
    for definition, comment, name in cursor.fetchall():
        triggers.append(definition)
        if comment is not None:
            triggers.append(f"COMMENT ON TRIGGER {_quote(name)} ON {table} IS {_literal(comment)}")
    return constraints, indexes, triggers


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _partition_index(definition: str, table: str, index: int) -> str:
    """``definition`` (from pg_get_indexdef) rewritten for one partition, named ``<index name>_pNN``."""
    match = _INDEX_DEF.match(definition)
    if match is None:
        raise PartitionError(f"cannot read index definition: {definition}")
    head, name, on, _, rest = match.groups()
    child = f"{name.strip(chr(34))}_p{index:02d}"[:63]
    return f"{head}{_quote(child)}{on}{partition_name(table, index)}{rest}"


def _sequence_state(cursor, table: str) -> tuple[str | None, int]:
    """The sequence behind ``seq`` (identity or owned) and the next value it must hand out."""
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'seq')", [table])
    sequence = cursor.fetchone()[0]
    cursor.execute(f"SELECT COALESCE(max(seq), 0) FROM {table}")
    top = int(cursor.fetchone()[0])
    if sequence is not None:
        cursor.execute(f"SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM {sequence}")
        top = max(top, int(cursor.fetchone()[0]))
    return sequence, top + 1


def partition(cursor, table: str, partitions: int, progress: Callable[[int], None] = lambda n: None) -> bool:
    """Hash-partition ``table`` by session_id into ``partitions``; False when it already is (nothing done).

    Must run inside a transaction: on any error nothing has changed.
    """
    if table not in TABLES:
        raise PartitionError(f"only {', '.join(TABLES)} are partitioned here, not {table!r}")
    if not isinstance(partitions, int) or partitions < 2:
        raise PartitionError("--partitions must be at least 2")
    cursor.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    now = layout(cursor, table)
    if now.partitions == partitions:
        return False
    unsafe = _unsafe_unique_indexes(cursor, table)
    if unsafe:
        raise PartitionError(
            f"unique indexes of {table} without {KEY}: {', '.join(unsafe)} (run `manage.py migrate` first)"
        )
    constraints, indexes, triggers = _definitions(cursor, table)
    columns = ", ".join(_copy_columns(cursor, table))
    _, next_seq = _sequence_state(cursor, table)
    new, sequence = f"{table}__partitioned", f"{table}__partitioned_seq"

    if now.partitions:  # re-partitioning: free the partition names
        cursor.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass", [table])
        for (old_part,) in cursor.fetchall():
            cursor.execute(f"ALTER TABLE {old_part} RENAME TO {old_part.strip(chr(34))}__old")
    cursor.execute(
        f"CREATE TABLE {new} (LIKE {table} INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING CONSTRAINTS "
        f"INCLUDING STORAGE INCLUDING COMMENTS) PARTITION BY HASH ({KEY})"
    )
    cursor.execute(f"CREATE SEQUENCE {sequence} AS bigint START WITH {next_seq}")
    cursor.execute(f"ALTER TABLE {new} ALTER COLUMN seq SET DEFAULT nextval('{sequence}')")
    for i in range(partitions):
        cursor.execute(
            f"CREATE TABLE {partition_name(table, i)} PARTITION OF {new} "
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i})"
        )

    cursor.execute(f"SELECT min(seq), max(seq) FROM {table}")
    low, high = cursor.fetchone()
    if low is not None:
        for start in range(int(low), int(high) + 1, BATCH):
            cursor.execute(
                f"INSERT INTO {new} ({columns}) SELECT {columns} FROM {table} "
                "WHERE seq >= %s AND seq < %s ORDER BY seq",
                [start, start + BATCH],
            )
            progress(cursor.rowcount)
    cursor.execute(f"SELECT count(*) FROM {new}")
    copied = int(cursor.fetchone()[0])
    if copied != now.rows:
        raise PartitionError(f"{table}: copied {copied} rows of {now.rows}")

    cursor.execute(f"DROP TABLE {table}")
    cursor.execute(f"ALTER TABLE {new} RENAME TO {table}")
    cursor.execute(f"ALTER SEQUENCE {sequence} RENAME TO {table}_seq_seq")
    cursor.execute(f"ALTER SEQUENCE {table}_seq_seq OWNED BY {table}.seq")
    cursor.execute(f"ALTER TABLE {table} ALTER COLUMN seq SET DEFAULT nextval('{table}_seq_seq')")
    for statement in constraints:
        cursor.execute(statement)
    for definition in indexes:
        # Named per-partition indexes first: the parent's CREATE INDEX then attaches them.
        for i in range(partitions):
            cursor.execute(_partition_index(definition, table, i))
        cursor.execute(definition)
    for statement in triggers:
        cursor.execute(statement)
    return True


def analyze(cursor, table: str) -> None:
    """Collect the planner's statistics for ``table`` (autovacuum never analyzes a partitioned parent)."""
    if table not in TABLES:
        raise PartitionError(f"not a partitioned table of this app: {table!r}")
    cursor.execute(f"ANALYZE {table}")
