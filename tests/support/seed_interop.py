"""Subprocess for the interop test: on a database the seed's DDL laid out (then migrated here),
write rows the seed's way and read them through the Python API; print the results as JSON."""

import json
import os

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    django.setup()
    from django.db import connection

    from agent_sessions import Session

    with connection.cursor() as cursor:
        # Exactly how the seed's Postgres provider inserts (no seq, depth or token columns).
        for mid, parent, text in [("s1", None, "deploy on Friday"), ("s2", "s1", "sounds good")]:
            content = json.dumps({"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]})
            cursor.execute(
                "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                [mid, "seed-session", parent, "user", content, text],
            )
        cursor.execute(
            "INSERT INTO cf_agents_context_blocks (label, content) VALUES ('memory_seed-session', 'likes tea')"
        )
    session = Session.create().for_session("seed-session")
    session.append_message({"id": "p1", "role": "assistant", "parts": [{"type": "text", "text": "python reply"}]})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, parent_id, depth FROM assistant_messages WHERE session_id = %s ORDER BY seq", ["seed-session"]
        )
        rows = cursor.fetchall()
    print(
        json.dumps(
            {
                "history": [m["id"] for m in session.get_history()],
                "search": [h.id for h in session.search("deploy")],
                "path_length": session.get_path_length(),
                "rows": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
