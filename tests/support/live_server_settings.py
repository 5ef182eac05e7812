"""Settings of the ASGI server the resumable-chat tests drive (SPEC §10): the events server's, with Redis from
``AGENT_SESSIONS_LIVE_REDIS_URL`` (default: the events tests' ``AGENT_SESSIONS_TEST_REDIS_URL``) and a 2-second
generation lease (shipped: 10), so a killed generation is recovered within the test's patience."""

import os

from tests.support.events_server_settings import *  # noqa: F403
from tests.support.events_server_settings import AGENT_SESSIONS_REDIS_URL as _EVENTS_REDIS_URL

AGENT_SESSIONS_REDIS_URL = os.environ.get("AGENT_SESSIONS_LIVE_REDIS_URL", _EVENTS_REDIS_URL)
AGENT_SESSIONS_CHAT_LEASE_SECONDS = 2.0
