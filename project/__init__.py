"""The runnable demo project around the agent_sessions app."""

from .celery import app as celery_app

__all__ = ["celery_app"]
