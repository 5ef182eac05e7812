"""Settings of the ASGI server in tests/test_async_asgi.py: the test settings on the live test
database, with the async turn view mounted and 8 database threads."""

from tests.settings import *  # noqa: F403

ROOT_URLCONF = "tests.support.async_urls"
AGENT_SESSIONS_ASYNC_THREADS = 8
