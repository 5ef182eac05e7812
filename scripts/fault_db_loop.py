"""A looping non-request client for the database-restart drill (tests/e2e/test_faults_db_restart.py).

Runs with the production settings (``project.settings``; ``DATABASE_URL`` and friends from
the environment) and no request boundary: for ``--seconds`` it appends a message and
reads the history back through a ``SessionManager``, recording every call's start, end
and error (if any) as JSON lines in ``--out``.  Acknowledged appends are listed so the
drill can check that each one is stored.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from agent_sessions.manager import SessionManager

    manager = SessionManager()
    session_id = manager.create(f"loop {args.name}").id
    deadline = time.time() + args.seconds
    i = 0
    with Path(args.out).open("w", encoding="utf-8") as out:
        out.write(json.dumps({"session": session_id}) + "\n")
        while time.time() < deadline:
            mid = f"{args.name}-{i}"
            started = time.time()
            try:
                manager.append(session_id, {"id": mid, "role": "user", "parts": [{"type": "text", "text": mid}]})
                out.write(json.dumps({"call": "append", "id": mid, "start": started, "end": time.time()}) + "\n")
                manager.get_history(session_id)
                out.write(json.dumps({"call": "history", "start": started, "end": time.time()}) + "\n")
                i += 1
            except Exception as exc:  # noqa: BLE001 - record it, as a client would, and go on
                error = f"{type(exc).__name__}: {exc}"[:300]
                out.write(json.dumps({"call": "failed", "id": mid, "start": started, "end": time.time(),
                                      "error": error}) + "\n")  # fmt: skip
                time.sleep(0.2)
            out.flush()
            time.sleep(0.02)


if __name__ == "__main__":
    main()
