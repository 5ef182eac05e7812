"""The chat benchmark's server process: uvicorn serving ``bench.chat_urls`` on a fresh bench database.

``python -m bench.chat_server <port> <alias>`` migrates, creates a user and an API key, prints the key
on one line, then serves until terminated (``bench/chat.py`` starts and stops it).
"""

from __future__ import annotations

import os
import sys
import time


def main(port: int, using: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()
    import uvicorn
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.asgi import get_asgi_application
    from django.core.management import call_command

    from agent_sessions.models import ApiKey

    from . import chat_urls

    settings.ROOT_URLCONF = "bench.chat_urls"
    chat_urls.USING["alias"] = using
    chat_urls.CHUNKS = int(os.environ.get("BENCH_CHAT_DELTAS", chat_urls.CHUNKS))
    for alias in {"default", using}:
        call_command("migrate", database=alias, verbosity=0)
    users = get_user_model()
    user = users.objects.db_manager("default").create_user(f"bench-chat-{time.time_ns()}")
    if using != "default":
        users.objects.using(using).update_or_create(pk=user.pk, defaults={"username": user.username})
    _, token = ApiKey.issue(user, "bench")
    print(token, flush=True)
    uvicorn.run(get_asgi_application(), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "default")
