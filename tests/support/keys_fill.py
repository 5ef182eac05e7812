"""Subprocess for the key and partitioning tests: fill a database, or read it back, as JSON on stdout.

``python -m tests.support.keys_fill fill``: write sessions the way the library and
a foreign writer do (a branching tree, an overlay, rows without seq/depth).
``python -m tests.support.keys_fill read``: print every session's rows in seq
order, histories, path lengths, search hits and overlays.
"""

import json
import os
import sys

import django

SESSIONS = ("alpha", "beta", "gamma-日本")


def fill() -> None:
    from django.db import connection

    from agent_sessions import Session

    for n, sid in enumerate(SESSIONS):
        session = Session.create().for_session(sid)
        for i in range(6):
            session.append_message(
                {
                    "id": f"m{i}",
                    "role": "user" if i % 2 == 0 else "assistant",
                    "parts": [{"type": "text", "text": f"{sid} message {i} about kites"}],
                }
            )
        session.append_message({"id": "b0", "role": "user", "parts": [{"type": "text", "text": "a branch"}]}, "m2")
        session.append_message({"id": "m6", "role": "user", "parts": [{"type": "text", "text": "back on m5"}]}, "m5")
        if n == 0:
            session.add_compaction("summary of m1..m3", "m1", "m3")
    with connection.cursor() as cursor:  # a foreign writer: no seq, depth or token columns
        for mid, parent in (("f0", None), ("f1", "f0")):
            content = json.dumps({"id": mid, "role": "user", "parts": [{"type": "text", "text": "foreign kites"}]})
            cursor.execute(
                "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content) "
                "VALUES (%s, %s, %s, 'user', %s, 'foreign kites')",
                [mid, "foreign", parent, content],
            )


def read() -> dict:
    from agent_sessions import Session
    from agent_sessions.models import Compaction, Message

    out = {"rows": list(Message.objects.order_by("seq").values_list("seq", "session_id", "message_id", "parent_id"))}
    out["overlays"] = list(Compaction.objects.order_by("seq").values_list("session_id", "compaction_id"))
    for sid in (*SESSIONS, "foreign"):
        session = Session.create().for_session(sid)
        out[sid] = {
            "history": [m["id"] for m in session.get_history()],
            "branch": [m["id"] for m in session.get_history("b0")],
            "length": session.get_path_length(),
            "search": sorted(h.id for h in session.search("kites")),
            "children_of_m2": [m["id"] for m in session.get_branches("m2")],
        }
    return out


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    django.setup()
    if sys.argv[1] == "fill":
        fill()
    print(json.dumps(read(), default=str))


if __name__ == "__main__":
    main()
