"""Django system checks for agent_sessions."""

from __future__ import annotations

from django.core import checks
from django.db import connections

SUPPORTED_VENDORS = {"sqlite", "postgresql"}


@checks.register(checks.Tags.database)
def check_database_vendor(app_configs=None, databases=None, **kwargs):
    """Only SQLite and Postgres have the full-text search this app relies on."""
    errors = []
    for alias in databases or []:
        vendor = connections[alias].vendor
        if vendor not in SUPPORTED_VENDORS:
            errors.append(
                checks.Warning(
                    f"agent_sessions supports SQLite and PostgreSQL; database '{alias}' is {vendor}.",
                    hint="Route agent_sessions models to a SQLite or PostgreSQL database.",
                    id="agent_sessions.W001",
                )
            )
    return errors
