"""SessionManager: a registry of named sessions over ``assistant_sessions`` (docs/architecture.md)."""

from __future__ import annotations

from ..exceptions import SessionNotFound
from .core import SessionManager, get_registered

__all__ = ["SessionManager", "SessionNotFound", "get_registered"]
