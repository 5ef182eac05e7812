"""Settings of the Celery worker that tests/e2e/test_faults_worker_kill.py kills with SIGKILL.

``tests.worker_settings`` (live test database, real Redis broker, test configurations)
with short timings so the redelivery happens within seconds instead of an hour:

* the Redis transport hands an unacknowledged message (``acks_late``) to another worker
  once ``visibility_timeout`` has passed, scanning every second;
* the session's compaction lease expires before that, so the redelivered run may take
  over from the dead one (in production: lease 600 s < visibility timeout 3600 s).
"""

import os

from tests.worker_settings import *  # noqa: F403

VISIBILITY_TIMEOUT = float(os.environ.get("AGENT_SESSIONS_FAULT_VISIBILITY_TIMEOUT", "6"))
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": VISIBILITY_TIMEOUT,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}
AGENT_SESSIONS_COMPACTION_LEASE_SECONDS = float(os.environ.get("AGENT_SESSIONS_FAULT_LEASE_SECONDS", "4"))
