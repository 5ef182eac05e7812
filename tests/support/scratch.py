"""Scratch databases for migration tests: a fresh database of the suite's vendor, and scripts run
against it in a process of their own (as a deployment runs ``manage.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent.parent


@contextmanager
def scratch_database() -> Iterator[str]:
    """A fresh, empty database of the current vendor; yields its DATABASE_URL."""
    if settings.DB != "postgres":
        with tempfile.TemporaryDirectory(prefix="agent-sessions-keys-") as tmp:
            yield f"sqlite:///{tmp}/db.sqlite3"
        return
    import psycopg

    default = settings.DATABASES["default"]
    params = dict(host=default["HOST"], port=default["PORT"], user=default["USER"])
    name = f"agent_sessions_keys_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(dbname="postgres", autocommit=True, **params)
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgres://{params['user']}@{params['host']}:{params['port']}/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def run_with(url: str, *args: str) -> str:
    """``python *args`` in the project root with ``url`` as its DATABASE_URL; its stdout (it must succeed)."""
    env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="project.settings", PYTHONPATH=str(ROOT))
    env.pop("AGENT_SESSIONS_DB_NAME", None)
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def migration_steps(script: str, targets: tuple[str, ...]) -> list[str]:
    """On a scratch database, migrate agent_sessions to each target in turn and run ``script``
    (``python -c``, its argument ``m<step>``) after each; its outputs, stripped."""
    outputs = []
    with scratch_database() as url:
        for i, target in enumerate(targets):
            run_with(url, "manage.py", "migrate", "agent_sessions", target, "--noinput", "-v0")
            outputs.append(run_with(url, "-c", script, f"m{i}").strip())
    return outputs
