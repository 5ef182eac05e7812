"""Races across real processes: auto-parented appends, upsert, compact, freeze.

Each racer is ``scripts/race_worker.py`` on the live test database; they connect first,
then start together on a stdin barrier.  Postgres runs the full 8 × 250 appends; SQLite
(one writer at a time, ``transaction_mode=IMMEDIATE``) runs a smaller variant.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

from agent_sessions import Session
from agent_sessions.manager import SessionManager
from agent_sessions.models import Compaction, ContextBlockRecord, Message
from tests.conftest import msg

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parent.parent


def race(mode: str, session_id: str, workers: int, count: int = 1, timeout: float = 240) -> list[dict]:
    """Run ``workers`` racers of ``mode`` at once; their JSON reports, in worker order."""
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="tests.settings",
        AGENT_SESSIONS_DB_NAME=str(connection.settings_dict["NAME"]),
        PYTHONPATH=str(ROOT),
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "scripts.race_worker", mode, session_id, f"w{w}", str(count)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    try:
        for proc in procs:  # the barrier: everyone connected and waiting
            line = proc.stdout.readline()
            assert line.strip() == "ready", (line, proc.stderr.read() if proc.poll() is not None else "")
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports = []
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, err[-3000:]
            reports.append(json.loads(out.strip().splitlines()[-1]))
        return reports
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def assert_one_chain(session_id: str, expected: int) -> list[str]:
    """Every message has at most one child, exactly one root, depth = position: a single chain."""
    rows = list(Message.objects.filter(session_id=session_id).values_list("message_id", "parent_id", "depth"))
    assert len(rows) == expected
    children = Counter(parent for _, parent, _ in rows)
    assert children[None] == 1, "more than one root"
    assert max(c for p, c in children.items() if p is not None) == 1, "an unintended branch"
    session = Session.create().for_session(session_id)
    history = session.get_history()
    assert len(history) == expected
    assert session.get_path_length() == expected
    assert sorted(d for _, _, d in rows) == list(range(1, expected + 1))
    return [m["id"] for m in history]


def test_concurrent_auto_parented_appends_form_one_chain(is_postgres, session_id):
    workers, count = (8, 250) if is_postgres else (4, 100)
    reports = race("append", session_id, workers, count)
    acked = [mid for r in reports for mid in r["acked"]]
    assert len(acked) == workers * count == len(set(acked))
    chain = assert_one_chain(session_id, workers * count)
    assert sorted(chain) == sorted(acked)  # every acknowledged append stored exactly once
    for r in reports:  # and each writer's own messages keep their order on the chain
        positions = [chain.index(mid) for mid in r["acked"]]
        assert positions == sorted(positions)


def test_concurrent_upsert_of_one_id_keeps_one_row(is_postgres, session_id):
    manager = SessionManager()
    race("upsert", session_id, 6 if is_postgres else 4, 20)
    rows = list(Message.objects.filter(session_id=session_id).values_list("message_id", "content"))
    assert sorted(mid for mid, _ in rows) == [f"u{i}" for i in range(5)]  # one row per id
    for _, content in rows:
        assert json.loads(content)["parts"][0]["text"].startswith("version from worker ")
    # Upserts only chain: each stored id appears once on one path.
    assert len(manager.get_history(session_id)) <= 5


def test_concurrent_compact_stores_one_overlay(session_id):
    session = Session.create().for_session(session_id)
    for i in range(12):
        session.append_message(msg(f"m{i}", "user" if i % 2 == 0 else "assistant", " ".join([f"word{i}"] * 20)))
    reports = race("compact", session_id, 4)
    stored = list(Compaction.objects.filter(session_id=session_id))
    assert len(stored) == 1, [(c.summary, c.from_message_id, c.to_message_id) for c in stored]
    winners = [r for r in reports if r["result"] is not None]
    assert len(winners) == 1
    assert winners[0]["result"][2] == stored[0].summary
    history = session.get_history()
    assert sum(m["id"].startswith("compaction_") for m in history) == 1


def test_concurrent_freeze_stores_one_prompt_everyone_sees(session_id):
    reports = race("freeze", session_id, 6)
    prompts = {r["prompt"] for r in reports}
    rows = ContextBlockRecord.objects.filter(label=f"_system_prompt_{session_id}")
    stored = list(rows.values_list("content", flat=True))
    assert len(stored) == 1
    assert prompts == {stored[0]}, prompts
    assert "rendered by worker w" in stored[0]
