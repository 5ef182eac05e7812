"""Restart PostgreSQL in the middle of a load run; nothing acknowledged may be lost.

Run by hand, never from the test suite (it restarts the machine's shared cluster)::

    python -m scripts.fault_pg_restart --clients 20 --duration 40 --restart-at 15

It creates a scratch database, migrates it, starts gunicorn (production-like settings,
``CONN_MAX_AGE=0``) on 127.0.0.1 and runs ``scripts/load.py``'s client mix.  After
``--restart-at`` seconds it runs ``pg_ctlcluster <version> <cluster> restart``.  Clients
keep going: a failed append is retried with the same id until the server answers again
(201, or 200 "already stored"), so acknowledgement means stored.  At the end it reports
the errors seen during and after the outage, how long after the restart the last error
came (recovery time), and compares every acknowledged append with the stored rows.

Exit status 0 when no acknowledged append is missing or doubled and no error happened
outside the outage window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scripts import load


def _cluster() -> tuple[str, str]:
    out = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        version, cluster, port, status, *_ = line.split()
        if port == "5432" and status.startswith("online"):
            return version, cluster
    raise SystemExit("no online PostgreSQL cluster on port 5432 (pg_lsclusters)")


def restart_postgres(version: str, cluster: str) -> tuple[float, float]:
    """``pg_ctlcluster … restart`` (fast shutdown: open connections are terminated); returns (start, end)."""
    started = time.monotonic()
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", "-m", "fast", version, cluster, "restart"],
        check=True,
        capture_output=True,
        text=True,
    )
    return started, time.monotonic()


def run(args) -> dict:
    version, cluster = _cluster()
    env = load.production_env(args.database)
    load.prepare_postgres(args.database, env)
    os.environ.update(
        {
            k: env[k]
            for k in (
                "DJANGO_SETTINGS_MODULE",
                "DATABASE_URL",
                "DJANGO_DEBUG",
                "DJANGO_SECRET_KEY",
                "DJANGO_ALLOWED_HOSTS",
                "DJANGO_SECURE_SSL_REDIRECT",
            )
        }
    )
    port = load.free_port()
    log = Path(tempfile.gettempdir()) / "agent-sessions-fault-gunicorn.log"
    server = load.start_gunicorn(env, port, workers=args.workers, log=log)
    window: dict[str, float] = {}

    async def restarter() -> None:
        await asyncio.sleep(args.restart_at)
        print(f"restarting PostgreSQL {version}/{cluster} …", flush=True)
        start, end = await asyncio.to_thread(restart_postgres, version, cluster)
        window.update(start=start, end=end)
        print(f"PostgreSQL back after {end - start:.2f} s", flush=True)

    async def drive(token: str):
        return await asyncio.gather(
            load.run_load(f"http://127.0.0.1:{port}/api", token, clients=args.clients, duration=args.duration),
            restarter(),
        )

    try:
        token = load.issue_token()
        from django.db import connections

        connections.close_all()  # the driver's own connection would die in the restart too
        print(f"load: {args.clients} clients for {args.duration:.0f} s; restart at {args.restart_at:.0f} s", flush=True)
        report, _ = asyncio.run(drive(token))
    finally:
        load.stop(server)
    load.check_consistency(report)
    summary = report.summary()
    grace = args.grace
    during = [t for t in report.error_times if window and window["start"] - 0.5 <= t <= window["end"] + grace]
    outside = len(report.error_times) - len(during)
    last = max(report.error_times) - window["end"] if report.error_times and window else 0.0
    summary["restart"] = {
        "cluster": f"{version}/{cluster}",
        "restart_seconds": round(window["end"] - window["start"], 2) if window else None,
        "errors_during_outage": len(during),
        "errors_outside_outage": outside,
        "last_error_after_restart_s": round(last, 2),
    }
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", default="agent_sessions_fault")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--duration", type=float, default=40.0)
    parser.add_argument("--restart-at", type=float, default=15.0)
    parser.add_argument("--grace", type=float, default=5.0, help="seconds after the restart still counted as outage")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    summary = run(args)
    load.print_report(summary)
    print(f"restart: {summary['restart']}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    import psycopg

    with psycopg.connect(
        host="127.0.0.1", user=os.environ.get("PGUSER", "postgres"), dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
    ok = summary["consistency"].get("ok") and summary["restart"]["errors_outside_outage"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
