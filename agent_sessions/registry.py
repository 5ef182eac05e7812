"""Named session configurations, so a Celery worker can rebuild what a web process built.

Callbacks (summarisers, providers) are Python objects a worker cannot receive
over a broker; the task gets ``(name, session_id)`` instead and looks the
configuration up here.  Configurations are registered at import time by
modules named ``sessions.py`` in installed apps (auto-imported like
``admin.py``), by the modules of ``AGENT_SESSIONS_CONFIG_MODULES``, by the modules this
app's surfaces hand to :func:`add_config_module` (the JSON API's own configuration, from
``apps.py``), or by ``SessionManager(name=...)``.  The registry names no module itself.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Protocol

from django.utils.module_loading import autodiscover_modules

from . import conf


class SessionFactory(Protocol):
    """Anything with ``get_session(session_id) -> Session`` (a SessionManager is one)."""

    def get_session(self, session_id: str) -> Any: ...


_REGISTRY: dict[str, SessionFactory] = {}
_discovered = False
_imported: set[str] = set()
_given: list[str] = []


class _CallableFactory:
    def __init__(self, fn):
        self._fn = fn

    def get_session(self, session_id: str) -> Any:
        return self._fn(session_id)


def register(name: str, factory: Any) -> None:
    """Register a configuration: an object with ``get_session(id)`` or a callable ``fn(id) -> Session``."""
    if not isinstance(name, str) or not name:
        raise ValueError("a configuration name must be a non-empty string")
    if not hasattr(factory, "get_session"):
        if not callable(factory):
            raise TypeError("register() needs an object with get_session(id) or a callable")
        factory = _CallableFactory(factory)
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    """Forget a configuration (tests use this)."""
    _REGISTRY.pop(name, None)


def add_config_module(module: str) -> None:
    """Import ``module`` (once, on the first lookup) before a configuration is looked up.

    How a layer above the registry registers a configuration of its own, in every process
    (a worker too), without the registry importing it.
    """
    if module not in _given:
        _given.append(module)


def autodiscover() -> None:
    """Import ``sessions.py`` of every installed app once, and each configuration module not imported yet."""
    global _discovered
    if not _discovered:
        _discovered = True
        autodiscover_modules("sessions")
    for module in dict.fromkeys([*_given, *conf.config_modules()]):
        if module not in _imported:
            import_module(module)
            _imported.add(module)


def get(name: str) -> SessionFactory | None:
    """The configuration registered under ``name`` (after autodiscovery), or None."""
    if name not in _REGISTRY:
        autodiscover()
    return _REGISTRY.get(name)


def names() -> list[str]:
    """Registered configuration names."""
    autodiscover()
    return sorted(_REGISTRY)
