"""Import a framework for an adapter, or fail with the extra that installs it."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType


def require(module: str, extra: str) -> ModuleType:
    """Import ``module``; if it is missing, raise ImportError naming ``pip install django-agent-sessions[extra]``."""
    try:
        return import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this adapter needs {module!r}: pip install django-agent-sessions[{extra}]", name=module
        ) from exc
