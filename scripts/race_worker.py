"""One racing process for the reliability tests (tests/test_reliability_concurrency.py).

Usage::

    DJANGO_SETTINGS_MODULE=tests.settings AGENT_SESSIONS_DB_NAME=<live test db> \
        python -m scripts.race_worker MODE SESSION_ID WORKER COUNT

``MODE``: ``append`` (COUNT auto-parented appends), ``upsert`` (COUNT upserts of the same
ids), ``compact`` (one ``compact()`` with a slow summariser), ``freeze`` (one
``freeze_system_prompt()`` whose rendered text names this worker).  Every process prints
``ready`` once connected and waits for a line on stdin (the parent's start signal), so they
all start together; then it prints one JSON line with what it did (the acknowledged ids,
the returned prompt, the compaction result).
"""

from __future__ import annotations

import json
import os
import sys
import time

import django


def _wait() -> None:
    """A barrier: say "ready", then block until the parent writes a line to every racer's stdin."""
    print("ready", flush=True)
    sys.stdin.readline()


def main(argv: list[str]) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    django.setup()
    from agent_sessions import Session, StaticProvider, create_compact_function
    from agent_sessions.manager import SessionManager

    mode, session_id, worker, count = argv[0], argv[1], argv[2], int(argv[3])
    out: dict = {"worker": worker, "mode": mode}
    if mode == "append":
        session = Session.create().for_session(session_id)
        session.get_path_length()  # connect before the start line
        _wait()
        acked = []
        for i in range(count):
            mid = f"{worker}-{i}"
            message = {"id": mid, "role": "user", "parts": [{"type": "text", "text": f"w{worker} n{i}"}]}
            if session.append_message(message):
                acked.append(mid)
        out["acked"] = acked
    elif mode == "upsert":
        manager = SessionManager()
        manager.get_message_count(session_id)
        _wait()
        for i in range(count):
            text = f"version from worker {worker} round {i}"
            manager.upsert(session_id, {"id": f"u{i % 5}", "role": "user", "parts": [{"type": "text", "text": text}]})
        out["done"] = count
    elif mode == "compact":

        def summarize(prompt: str) -> str:
            time.sleep(0.5)  # a slow LLM: every racer is inside compact() at once
            return f"summary by worker {worker}"

        fn = create_compact_function(summarize, protect_head=1, tail_token_budget=10, min_tail_messages=2)
        session = Session.create().for_session(session_id).on_compaction(fn)
        session.get_path_length()
        _wait()
        result = session.compact()
        out["result"] = None if result is None else [result.from_message_id, result.to_message_id, result.summary]
    elif mode == "freeze":
        session = (
            Session.create()
            .for_session(session_id)
            .with_context("soul", provider=StaticProvider(f"rendered by worker {worker}"))
            .with_cached_prompt()
        )
        session.get_path_length()
        _wait()
        out["prompt"] = session.freeze_system_prompt()
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])), flush=True)
