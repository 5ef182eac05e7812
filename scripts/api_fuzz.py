"""Schemathesis against a real gunicorn: every check, every phase (stateful included), on a fresh database.

Creates the database (Postgres: a new one; SQLite: a file in a temporary directory), migrates, issues
an API key, starts gunicorn with the production settings (DEBUG off) and runs::

    schemathesis run <server>/api/openapi.json --checks all --phases examples,coverage,fuzzing,stateful \\
        --max-examples N -H "Authorization: Bearer <key>"

``make api-fuzz`` runs it with 300 examples per operation on both databases; the test suite runs it with
a few.  Exit status: schemathesis' own (0 when no check failed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from scripts.load import ROOT, free_port, prepare_postgres, production_env, start_gunicorn, stop

PHASES = "examples,coverage,fuzzing,stateful"

_ISSUE_KEY = """
import django
django.setup()
from django.contrib.auth import get_user_model
from agent_sessions.models import ApiKey
user, _ = get_user_model().objects.get_or_create(username="fuzzer")
print(ApiKey.issue(user, "schemathesis")[1])
"""


def prepare(db: str, workdir: Path) -> tuple[dict, str | None]:
    """Environment of a production-like server on a fresh database; the Postgres database name (to drop)."""
    if db == "postgres":
        name = f"agent_sessions_fuzz_{uuid.uuid4().hex[:8]}"
        env = production_env(name)
        prepare_postgres(name, env)
        return env, name
    env = production_env("unused")
    env["DATABASE_URL"] = f"sqlite:///{workdir / 'fuzz.sqlite3'}"
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    return env, None


def drop_postgres(name: str) -> None:
    import psycopg

    with psycopg.connect(
        host="127.0.0.1", user=os.environ.get("PGUSER", "postgres"), dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(db: str, examples: int, *, workers: int = 2, phases: str = PHASES, extra: list[str] | None = None) -> int:
    """One schemathesis run against a fresh server; returns its exit status."""
    with tempfile.TemporaryDirectory(prefix="agent-sessions-fuzz-") as tmp:
        workdir = Path(tmp)
        env, pg_name = prepare(db, workdir)
        server = None
        try:
            token = subprocess.run(
                [sys.executable, "-c", _ISSUE_KEY], cwd=ROOT, env=env, check=True, capture_output=True, text=True
            ).stdout.strip()
            port = free_port()
            server = start_gunicorn(env, port, workers=workers, log=workdir / "gunicorn.log", startup_timeout=300)
            command = [
                str(Path(sys.executable).with_name("schemathesis")),
                "run",
                f"http://127.0.0.1:{port}/api/openapi.json",
                "--checks",
                "all",
                "--phases",
                phases,
                "--max-examples",
                str(examples),
                "--header",
                f"Authorization: Bearer {token}",
                "--suppress-health-check",
                "all",
                "--request-timeout",
                "60",
                "--workers",
                "1",
                "--seed",
                "1",
                *(extra or []),
            ]
            print(f"api-fuzz: {db}, {examples} examples per operation, phases {phases}", flush=True)
            return subprocess.run(command, cwd=ROOT, env={**env, "NO_COLOR": "1"}).returncode
        finally:
            if server is not None:
                stop(server)
            if pg_name is not None:
                drop_postgres(pg_name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), action="append", help="default: both")
    parser.add_argument("--examples", type=int, default=300, help="examples per operation")
    parser.add_argument("--phases", default=PHASES)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    args, extra = parser.parse_known_args(argv)
    status = 0
    for db in args.db or ("sqlite", "postgres"):
        status |= run(db, args.examples, workers=args.workers, phases=args.phases, extra=extra)
    return status


if __name__ == "__main__":
    sys.exit(main())
