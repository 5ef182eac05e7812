"""Pick the vendor module for a connection; nothing above storage/ knows the vendor."""

from __future__ import annotations

from types import ModuleType

from django.db import connections

from ..exceptions import SearchNotSupported
from . import postgres, sqlite

_BY_VENDOR = {"sqlite": sqlite, "postgresql": postgres}


def for_vendor(vendor: str) -> ModuleType:
    """The backend module for a vendor name; SearchNotSupported for others."""
    try:
        return _BY_VENDOR[vendor]
    except KeyError:
        raise SearchNotSupported(f"agent_sessions has no SQL backend for {vendor!r}") from None


def for_alias(using: str) -> ModuleType:
    """The backend module for a database alias."""
    return for_vendor(connections[using].vendor)
