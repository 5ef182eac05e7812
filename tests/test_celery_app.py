"""make_celery_app: the project's Celery app reads CELERY_* from Django settings and finds this app's tasks."""

from __future__ import annotations

import logging

import pytest
from celery import current_app
from django.test import override_settings

from agent_sessions.celery import make_celery_app

pytestmark = pytest.mark.django_db  # the suite's session teardown needs the test database


def test_the_app_reads_django_settings_and_finds_the_compaction_tasks():
    previous = current_app._get_current_object()
    try:
        with override_settings(CELERY_BROKER_URL="redis://broker.invalid:6379/3", CELERY_TASK_ACKS_LATE=True):
            app = make_celery_app("project")
            assert app.main == "project"
            assert app.conf.broker_url == "redis://broker.invalid:6379/3"
            assert app.conf.task_acks_late is True
        app.loader.import_default_modules()
        assert {"agent_sessions.tasks.compact_session", "agent_sessions.tasks.sweep_pending_compactions"} <= set(
            app.tasks
        )
        assert current_app._get_current_object() is app  # the web process publishes through it
    finally:
        previous.set_current()


def test_a_worker_logs_the_configurations_it_can_rebuild(caplog):
    from agent_sessions import celery as helper
    from tests import sessions_registry

    with caplog.at_level(logging.INFO, logger="agent_sessions"):
        helper._import_session_configurations()  # what worker_ready runs (its sweeper is not started here)
    (line,) = [r.getMessage() for r in caplog.records if "session configurations" in r.getMessage()]
    assert sessions_registry.SLOW in line
    assert sessions_registry.FAST in line


@pytest.mark.parametrize("name", ["", None])
def test_the_project_name_is_required(name):
    with pytest.raises(ValueError, match="make_celery_app"):
        make_celery_app(name)  # type: ignore[arg-type]
