"""Named configurations this app ships, found by ``registry.autodiscover()`` in Celery workers.

Importing the API's configuration registers its default SessionManager
(``"agent_sessions.api"``), so a worker can rebuild API sessions for
auto-compaction without extra settings.
"""

from .api import config  # noqa: F401  (registers the API's default configuration)
