"""A project's Celery app in one line: ``celery_app = make_celery_app("mysite")`` in ``mysite/__init__.py``.

The app reads ``CELERY_*`` from the Django settings, finds the tasks of every installed app
(this app's compaction tasks among them) and, in a worker, imports the named session
configurations (``sessions.py`` of each installed app and ``AGENT_SESSIONS_CONFIG_MODULES``)
as it starts and logs their names, so a module that fails to import shows at start, not on the
first compaction.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import worker_ready

__all__ = ["make_celery_app"]

logger = logging.getLogger("agent_sessions")


def make_celery_app(project: str, *, settings_module: str | None = None) -> Celery:
    """A Celery app named ``project``, configured from ``django.conf:settings`` (namespace ``CELERY``).

    ``DJANGO_SETTINGS_MODULE`` defaults to ``settings_module`` or ``"<project>.settings"``, so
    ``celery -A <project> worker`` needs no environment. The app becomes Celery's current app:
    the web process publishes compaction tasks through it, the worker runs them.
    """
    if not isinstance(project, str) or not project:
        raise ValueError("make_celery_app() needs the project's package name, e.g. make_celery_app('mysite')")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings_module or f"{project}.settings")
    app = Celery(project)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.autodiscover_tasks()
    return app


@worker_ready.connect
def _import_session_configurations(**_: Any) -> None:
    """Import every named configuration once the worker is up and log their names."""
    from . import registry

    names = registry.names()
    logger.info("agent_sessions: session configurations in this worker: %s", ", ".join(names) or "none")
