"""The shipped project's settings, with the bench's bare endpoints mounted beside the API (``bench.http_urls``)."""

from project.settings import *  # noqa: F403

ROOT_URLCONF = "bench.http_urls"

# The load runs measure throughput with one key: the API's rate limits would answer 429 instead.
AGENT_SESSIONS_API_KEY_RATE_LIMIT = None
AGENT_SESSIONS_API_USER_RATE_LIMIT = None
