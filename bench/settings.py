"""Django settings for the benchmarks: one SQLite and one Postgres alias, side by side in one process."""

import os
import tempfile
from pathlib import Path

from project.settings import *  # noqa: F403

_DIR = tempfile.mkdtemp(prefix="agent-sessions-bench-")
BENCH_PG_NAME = os.environ.get("BENCH_PG_NAME", "agent_sessions_bench")

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(Path(_DIR) / "bench.sqlite3"),
        "OPTIONS": {
            "timeout": 60,
            "transaction_mode": "IMMEDIATE",
            # What the demo project uses too: WAL lets readers run beside the writer,
            # and synchronous=NORMAL is durable across application crashes in WAL mode.
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    },
    "postgres": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": BENCH_PG_NAME,
        "USER": os.environ.get("PGUSER", "postgres"),
        "PASSWORD": os.environ.get("PGPASSWORD", ""),
        "HOST": os.environ.get("PGHOST", "127.0.0.1"),
        "PORT": os.environ.get("PGPORT", "5432"),
    },
}
if os.environ.get("BENCH_DEFAULT_DB") == "postgres":  # for benches that go through the admin (bench.admin_search)
    DATABASES["default"] = dict(DATABASES["postgres"])
DEBUG = False
CELERY_TASK_ALWAYS_EAGER = True
CELERY_BROKER_URL = "memory://"
# Workload 9 (bench/async_load.py): database threads for the async API; the whole bench stays
# under ~30 connections (the peers' pools are 15).
AGENT_SESSIONS_ASYNC_THREADS = 16
