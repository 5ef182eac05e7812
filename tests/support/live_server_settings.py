"""Settings of the ASGI server the resumable-chat tests drive (SPEC §10): the events server's, with Redis from
``AGENT_SESSIONS_LIVE_REDIS_URL`` (default: the events tests' ``AGENT_SESSIONS_TEST_REDIS_URL``). The generation
lease is the shipped one: the kill drill proves the recovery time users get, not a shortened one."""

import os

from tests.support.events_server_settings import *  # noqa: F403
from tests.support.events_server_settings import AGENT_SESSIONS_REDIS_URL as _EVENTS_REDIS_URL

AGENT_SESSIONS_REDIS_URL = os.environ.get("AGENT_SESSIONS_LIVE_REDIS_URL", _EVENTS_REDIS_URL)
