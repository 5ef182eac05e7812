"""Celery app of the demo project; tasks run inline (eager) when no broker is configured (project/settings.py)."""

from agent_sessions.celery import make_celery_app

app = make_celery_app("project")
