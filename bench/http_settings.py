"""The shipped project's settings, with the bench's bare endpoints mounted beside the API (``bench.http_urls``)."""

from project.settings import *  # noqa: F403

ROOT_URLCONF = "bench.http_urls"
