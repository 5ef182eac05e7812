"""``manage.py partition_tables --partitions 16``: hash-partition the growing tables by session_id (PostgreSQL)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError
from django.db import connections, transaction

from agent_sessions.storage import postgres_partitions as pgparts

from ._base import ProgressCommand


class Command(ProgressCommand):
    help = (
        "Convert assistant_messages and assistant_compactions in place into tables hash-partitioned by "
        "session_id (PostgreSQL declarative partitioning), in one transaction. Running it again with the "
        "same count does nothing; another count re-partitions. Takes an exclusive lock on both tables "
        "while it copies their rows."
    )

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--partitions", type=int, default=16, help="Number of hash partitions (default 16).")
        parser.add_argument(
            "--no-analyze", action="store_true", help="Do not ANALYZE the new tables (leave statistics to autovacuum)."
        )

    def handle(self, *args: Any, partitions: int, no_analyze: bool = False, **options: Any) -> None:
        using = self.alias(options)
        connection = connections[using]
        if connection.vendor != "postgresql":
            raise CommandError(
                f"partition_tables needs PostgreSQL; database {using!r} is {connection.vendor}, "
                "which has no table partitioning (nothing was changed)"
            )
        if partitions < 2:
            raise CommandError("--partitions must be at least 2")
        changed = []
        try:
            with transaction.atomic(using=using), connection.cursor() as cursor:
                for table in pgparts.TABLES:
                    now = pgparts.layout(cursor, table)
                    if now.partitions == partitions:
                        continue
                    with self.bar(total=now.rows, desc=table, unit="row") as bar:
                        if pgparts.partition(cursor, table, partitions, progress=bar.update):
                            changed.append(table)
        except pgparts.PartitionError as exc:
            raise CommandError(f"{exc} (nothing was changed)") from None
        if changed and not no_analyze:
            with connection.cursor() as cursor:
                for table in changed:
                    # Autovacuum never analyzes a partitioned parent: give the planner its statistics now.
                    pgparts.analyze(cursor, table)
        for table in pgparts.TABLES if self.verbosity else ():
            state = "partitioned" if table in changed else "already partitioned"
            self.stdout.write(f"{table}: {state} by hash of session_id into {partitions} partitions")
