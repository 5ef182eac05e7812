"""Settings of the Celery worker started by ``tests/e2e/test_celery_worker.py``.

The test settings, pointed at the live test database (``AGENT_SESSIONS_WORKER_DB_NAME``,
same engine via ``AGENT_SESSIONS_TEST_DB``) and a real broker
(``AGENT_SESSIONS_WORKER_BROKER_URL``), with tasks no longer eager and the test
configurations importable by name.
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASES

DATABASES["default"]["NAME"] = os.environ["AGENT_SESSIONS_WORKER_DB_NAME"]
CELERY_BROKER_URL = os.environ["AGENT_SESSIONS_WORKER_BROKER_URL"]
CELERY_TASK_ALWAYS_EAGER = False
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("AGENT_SESSIONS_WORKER_QUEUE", "celery")
AGENT_SESSIONS_CONFIG_MODULES = ["tests.sessions_registry"]
