"""Settings of the uvicorn server the chat tests drive with the real ``ai`` client: the test settings
on the live test database, with the scripted chat endpoint mounted (``tests/support/chat_urls.py``)."""

from tests.settings import *  # noqa: F403

ROOT_URLCONF = "tests.support.chat_urls"
