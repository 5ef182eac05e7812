"""A 5-second run of ``scripts/load.py`` against a real gunicorn on the live test database.

The full run (20 clients × 60 s on Postgres) is ``python -m scripts.load --start``; this
smoke version checks the same things on a small scale: the mix runs without a single
error and every acknowledged append is stored exactly once.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from django.db import connection

from agent_sessions.models import ApiKey, Message
from scripts import load

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


@pytest.fixture
def server(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "AGENT_SESSIONS_TEST_DB": "postgres" if connection.vendor == "postgresql" else "sqlite",
        "AGENT_SESSIONS_DB_NAME": str(connection.settings_dict["NAME"]),
        "PYTHONPATH": str(load.ROOT),
    }
    port = load.free_port()
    log = tmp_path / "gunicorn.log"
    process = load.start_gunicorn(env, port, workers=2, log=log)
    try:
        yield f"http://127.0.0.1:{port}/api"
    finally:
        load.stop(process)


def test_five_second_load_has_no_errors_and_loses_nothing(server, django_user_model):
    user = django_user_model.objects.create_user("load-smoke")
    token = ApiKey.issue(user, "smoke")[1]
    report = asyncio.run(load.run_load(server, token, clients=8, duration=5.0, seed=7))
    summary = report.summary()
    assert summary["errors"] == {}, summary["error_samples"]
    assert summary["routes"]["append"]["count"] >= 20
    assert {"append", "history"} <= set(summary["routes"])
    verdict = load.check_consistency(report)
    assert verdict["ok"], verdict
    assert verdict["missing"] == 0, verdict
    assert verdict["duplicated_or_unknown"] == 0, verdict
    assert verdict["acknowledged"] == summary["acknowledged_appends"] > 0
    for session_id, acked in report.acked.items():  # the same, in the test's own words
        stored = sorted(Message.objects.filter(session_id=session_id).values_list("message_id", flat=True))
        assert stored == sorted(acked)
