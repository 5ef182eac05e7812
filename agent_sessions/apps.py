"""Django app config for agent_sessions."""

from django.apps import AppConfig


class AgentSessionsConfig(AppConfig):
    name = "agent_sessions"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers system checks)
