"""``python -m bench.search_scale``: per-session and cross-session search, small vs large database, interleaved.

Loads ``bench.scale``'s data set (COPY) into two PostgreSQL databases,
``bench_search_<layout>_<rows>``, at ``--small`` and ``--messages`` rows, plain
or hash-partitioned (``--partitions``), then times ``Session.search("kite")``
in the 1,000-message session and ``SessionManager().search("zephyr")`` on
both databases round by round, so a busy machine slows both alike. Prints
medians, large ÷ small, and what EXPLAIN (ANALYZE, BUFFERS) says each query
reads. ``--keep`` keeps the databases (and reuses kept ones next time).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time

PATTERN = re.compile(
    r"(Index Scan|Index Only Scan|Bitmap Index Scan|Seq Scan)(?: using (\S+))? on (\S+)"
    r"|Buffers: shared hit=(\d+)(?: read=(\d+))?"
)


def _name(layout: str, rows: int) -> str:
    return f"bench_search_{layout}_{rows}"


def _ensure(alias: str, rows: int, partitions: int | None, keep: bool) -> dict:
    """Load ``rows`` into ``alias``'s database unless a kept copy with that many rows exists."""
    from django.core.management import call_command
    from django.db import DatabaseError, connections

    from . import scale

    if keep:
        try:
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT count(*) FROM assistant_messages")
                if cursor.fetchone()[0] >= rows:
                    return {"reused": True, **scale.sizes_of(alias)}
        except DatabaseError:
            connections[alias].close()
    scale.fresh_database(alias)
    if partitions:
        call_command("partition_tables", partitions=partitions, database=alias, no_progress=True)
    sessions = max(2, rows // 100)
    return {**scale.load(alias, rows, sessions), **scale.sizes_of(alias)}


def _reads(alias: str, query: str, scope: str | None) -> str:
    """The scans and shared buffers of the compiled search, from EXPLAIN (ANALYZE, BUFFERS)."""
    from django.db import connections

    from agent_sessions import conf
    from agent_sessions.search import tsquery
    from agent_sessions.search.args import as_query
    from agent_sessions.search.plan import MESSAGES, Filters

    filters = Filters(scope=scope, limit=20, snippets=True)
    sql, params = tsquery.compile_query(as_query(query), MESSAGES, filters, conf.pg_text_search_config())
    with connections[alias].cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        lines = [r[0] for r in cursor.fetchall()]
    scans = sorted({f"{m[1]} {m[2] or m[3]}" for line in lines for m in PATTERN.finditer(line) if m[1]})
    top = next((m for line in lines for m in PATTERN.finditer(line) if m[4]), None)
    buffers = int(top[4]) + int(top[5] or 0) if top else 0
    shown = scans if len(scans) <= 3 else [*scans[:2], f"… {len(scans)} scans"]
    return f"{buffers} buffers; " + ", ".join(shown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--small", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=0, help="hash partitions (0: plain tables)")
    parser.add_argument("--rounds", type=int, default=61)
    parser.add_argument("--keep", action="store_true", help="keep the databases; reuse kept ones")
    args = parser.parse_args(argv)

    layout = f"p{args.partitions}" if args.partitions else "plain"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django
    from django.conf import settings

    django.setup()
    from django.db import connections

    from agent_sessions import Session, SessionManager

    from . import scale
    from .__main__ import _fresh_postgres

    base = settings.DATABASES["postgres"]
    aliases = {"small": args.small, "large": args.messages}
    for alias, rows in aliases.items():
        settings.DATABASES[alias] = {**base, "NAME": _name(layout, rows)}
        connections.settings[alias] = connections.settings["postgres"] | {"NAME": _name(layout, rows)}
        info = _ensure(alias, rows, args.partitions, args.keep)
        print(
            f"{alias}: {rows:,} messages ({layout}) "
            + ("kept" if info.get("reused") else f"loaded in {info['load_s']} s")
            + f"; table {info['table_bytes'] / 2**20:,.0f} MB, indexes {info['indexes_bytes'] / 2**20:,.0f} MB",
            flush=True,
        )

    ops = {}
    for alias in aliases:
        deep = Session.create(using=alias).for_session(scale.DEEP)
        manager = SessionManager(using=alias)
        ops[("per-session search", alias)] = lambda deep=deep: deep.search(scale.PER_SESSION_WORD)
        ops[("cross-session search", alias)] = lambda manager=manager: manager.search(scale.RARE)
    for fn in ops.values():
        fn()
    times: dict = {key: [] for key in ops}
    for _ in range(args.rounds):
        for key, fn in ops.items():
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    print(f"{'operation':<22} {'small':>9} {'large':>9} {'large ÷ small':>14}   reads (small | large)")
    for op, query, scope in (
        ("per-session search", scale.PER_SESSION_WORD, scale.DEEP),
        ("cross-session search", scale.RARE, None),
    ):
        small, large = (statistics.median(times[(op, a)]) * 1e3 for a in aliases)
        reads = " | ".join(_reads(a, query, scope) for a in aliases)
        print(f"{op:<22} {small:6.2f} ms {large:6.2f} ms {large / small:14.2f}   {reads}")
    if not args.keep:
        for alias in aliases:
            connections[alias].close()
            _fresh_postgres(connections[alias].settings_dict, create=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
