"""Settings for the test suite. ``AGENT_SESSIONS_TEST_DB=sqlite|postgres`` picks the database.

Each test process gets its own database name, so several runs (and helpers)
can share one Postgres server without clobbering each other.
"""

import os
import tempfile
from pathlib import Path

from project.settings import *  # noqa: F403

DB = os.environ.get("AGENT_SESSIONS_TEST_DB", "sqlite").strip().lower()
_RUN = os.environ.get("AGENT_SESSIONS_TEST_RUN_ID") or str(os.getpid())

if DB in {"postgres", "postgresql", "pg"}:
    DB = "postgres"
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": f"agent_sessions_{_RUN}",
            "USER": os.environ.get("PGUSER", "postgres"),
            "PASSWORD": os.environ.get("PGPASSWORD", ""),
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
            "TEST": {"NAME": f"test_agent_sessions_{_RUN}"},
        }
    }
    # AGENT_SESSIONS_TEST_SERVER_BINDING=1: psycopg binds parameters on the server and prepares
    # statements (Django's OPTIONS server_side_binding and prepare_threshold), as a deployment
    # that opts into prepared statements runs; every statement of the library must work so.
    if os.environ.get("AGENT_SESSIONS_TEST_SERVER_BINDING"):
        # Prepared from the second execution on, so short tests run their statements prepared too.
        DATABASES["default"]["OPTIONS"] = {**PREPARED_STATEMENTS_OPTIONS, "prepare_threshold": 2}  # noqa: F405
else:
    DB = "sqlite"
    _DIR = tempfile.mkdtemp(prefix="agent-sessions-tests-")
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(Path(_DIR) / "db.sqlite3"),
            # A file, not :memory:, so threads and subprocesses share the test database.
            "TEST": {"NAME": str(Path(_DIR) / "test.sqlite3")},
            "OPTIONS": {
                "timeout": 60,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }

# A subprocess of a test (a second writer, a worker) points at the live test database.
if os.environ.get("AGENT_SESSIONS_DB_NAME"):
    DATABASES["default"]["NAME"] = os.environ["AGENT_SESSIONS_DB_NAME"]

# A read replica for the router test (tests/test_replicas.py): in tests it mirrors the
# default database (same data, its own connection); only a router sends queries there.
DATABASES["replica"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}

# AGENT_SESSIONS_TEST_PARTITIONS=16: hash-partition the growing tables of the test database
# right after migrations (tests/conftest.py), so the whole suite runs on partitioned tables.
TEST_PARTITIONS = int(os.environ.get("AGENT_SESSIONS_TEST_PARTITIONS") or 0)
if TEST_PARTITIONS and DB != "postgres":
    raise RuntimeError("AGENT_SESSIONS_TEST_PARTITIONS needs AGENT_SESSIONS_TEST_DB=postgres")

SECRET_KEY = "tests-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
MEDIA_ROOT = tempfile.mkdtemp(prefix="agent-sessions-media-")
# WhiteNoise (project/settings.py) reads STATIC_ROOT at start-up: an empty folder of the run, not the repository's.
STATIC_ROOT = Path(tempfile.mkdtemp(prefix="agent-sessions-static-"))
CELERY_BROKER_URL = "memory://"
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = False
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
SECURE_SSL_REDIRECT = False
# The API's rate limits are off here: the fuzzing and load tests send thousands of requests with one key.
# tests/test_api_rate_limits.py turns them on with small rates and asserts the shipped defaults.
AGENT_SESSIONS_API_KEY_RATE_LIMIT = None
AGENT_SESSIONS_API_USER_RATE_LIMIT = None
