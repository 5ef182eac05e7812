"""Settings of the ASGI server the session-event tests subscribe to: the chat server's, with session events on
the Redis named by ``AGENT_SESSIONS_TEST_REDIS_URL`` (DB 13 by default) and a short heartbeat."""

import os

from tests.support.chat_server_settings import *  # noqa: F403

AGENT_SESSIONS_REDIS_URL = os.environ.get("AGENT_SESSIONS_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
AGENT_SESSIONS_EVENTS_HEARTBEAT_SECONDS = 0.5
