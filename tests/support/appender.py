"""Subprocess used by the concurrency tests: append N auto-parented messages to one session.

Usage: python -m tests.support.appender SESSION_ID PREFIX COUNT
(DJANGO_SETTINGS_MODULE=tests.settings, AGENT_SESSIONS_DB_NAME=<live test database>).
"""

import os
import sys

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    django.setup()
    from agent_sessions import Session

    session_id, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    session = Session.create().for_session(session_id)
    for i in range(count):
        session.append_message({"id": f"{prefix}-{i}", "role": "user", "parts": [{"type": "text", "text": str(i)}]})


if __name__ == "__main__":
    main()
