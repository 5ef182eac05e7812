"""The django-ninja JSON API of agent_sessions (docs/api.md), mounted with ``include("agent_sessions.urls")``.

``agent_sessions.api.api`` is the :class:`ninja.NinjaAPI`; it is built on first
access, so importing this package (e.g. for :mod:`.tokens`) needs no app registry.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "api":
        from .main import api

        return api
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
