"""``python -m bench``: every workload on SQLite and Postgres, side by side in one process.

Prints medians and ratios (ours ÷ reference) and writes a JSON copy.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

WORKLOADS = ("append", "append_all", "history", "search", "fork", "convert", "model_calls", "http")
OPT_IN = ("async",)
"""Workloads run only when named in ``--only`` (workload 9 takes minutes: ``--db postgres --only async``)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="100 rows per workload, 1 round (a quick check)")
    parser.add_argument("-n", type=int, default=10_000, help="messages per session (default 10,000)")
    parser.add_argument("--append-n", type=int, default=None, help="appends one by one per implementation (default n)")
    parser.add_argument("--search-rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument(
        "--only", default=",".join(WORKLOADS), help=f"comma-separated subset of {','.join(WORKLOADS + OPT_IN)}"
    )
    parser.add_argument("--http-seconds", type=float, default=3.0, help="seconds per HTTP round (workload 7)")
    parser.add_argument("--json", default="bench/results/latest.json")
    parser.add_argument(
        "--charts", default=None, help="directory for the PNG charts (default bench/charts; none with --smoke)"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.n, args.append_n, args.search_rows, args.rounds, args.http_seconds = 100, 100, 1_000, 1, 0.5

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    from . import convert, workloads
    from . import peers as peer_mod
    from .charts import draw
    from .goals import evaluate, print_goals
    from .harness import dump_json, print_table

    aliases = {"sqlite": "default", "postgres": "postgres"}
    chosen = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    if "postgres" in chosen:
        _fresh_postgres(connections["postgres"].settings_dict)
    results = []
    for database in chosen:
        alias = aliases[database]
        call_command("migrate", database=alias, verbosity=0, interactive=False)
        dsn = connections[alias].settings_dict
        peers = [] if args.no_peers else peer_mod.available(database, dsn)
        print(f"== {database}: n={args.n}, rounds={args.rounds}, peers={[p.name for p in peers]}", flush=True)
        only = set(args.only.split(","))
        if "append" in only:
            results += workloads.append_one_by_one(alias, database, args.append_n or args.n, peers)
        if "append_all" in only:
            results += workloads.append_all(alias, database, args.n, peers, args.rounds)
        if "history" in only:
            results += workloads.history_reads(alias, database, args.n, peers, args.rounds)
            results += workloads.history_by_depth(alias, database, args.n, peers, args.rounds)
        if "search" in only:
            results += workloads.search(alias, database, args.search_rows, args.rounds)
        if "fork" in only:
            results += workloads.fork(alias, database, args.n, args.rounds)
        if "convert" in only:
            fresh = [] if args.no_peers else peer_mod.available(database, dsn)  # an empty store of its own
            results += convert.workload(alias, database, min(args.n, 1_000), max(args.rounds, 5), fresh)
            for peer in fresh:
                peer.close()
        if "model_calls" in only:
            from . import model_calls

            ops = 20 if args.smoke else 200
            results += model_calls.workload(alias, database, min(args.n, 1_000), ops)
        for peer in peers:
            peer.close()
        if "http" in only and database == "postgres":
            from . import http_load

            results += http_load.workload(alias, database, args.rounds, args.http_seconds)
        if "async" in only and database == "postgres":
            from . import async_load

            turns = 5 if args.smoke else 50
            rounds = min(args.rounds, 3)
            results += async_load.workload(alias, database, turns=turns, rounds=rounds, peers=not args.no_peers)
    if args.smoke and "postgres" in chosen:
        connections["postgres"].close()
        _fresh_postgres(connections["postgres"].settings_dict, create=False)
    print()
    print_table(results)
    goals = evaluate(results)
    print_goals(goals)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    dump_json(results, args.json, goals=goals, machine=machine())
    print(f"JSON: {args.json}")
    charts = args.charts if args.charts is not None else ("" if args.smoke else "bench/charts")
    for path in draw(results, charts) if charts else []:
        print(f"chart: {path}")
    return 0


def machine() -> dict:
    """Where and under what load the run happened (the machine is shared: ratios in one run count)."""
    import platform

    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _fresh_postgres(settings_dict: dict, *, create: bool = True) -> None:
    """Drop (and create) the benchmark database, so every run starts from the same empty state."""
    import psycopg

    with psycopg.connect(
        host=settings_dict["HOST"],
        port=settings_dict["PORT"],
        user=settings_dict["USER"],
        dbname="postgres",
        autocommit=True,
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{settings_dict["NAME"]}" WITH (FORCE)')
        if create:
            conn.execute(f'CREATE DATABASE "{settings_dict["NAME"]}"')


if __name__ == "__main__":
    sys.exit(main())
