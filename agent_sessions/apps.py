"""Django app config for agent_sessions."""

from django.apps import AppConfig


class AgentSessionsConfig(AppConfig):
    name = "agent_sessions"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            checks,  # noqa: F401  (registers system checks)
            registry,
        )

        # The JSON API's default configuration, imported on the first lookup (a worker rebuilds
        # API sessions by its name); the registry, far below the API, only holds what it is given.
        registry.add_config_module("agent_sessions.api.config")
