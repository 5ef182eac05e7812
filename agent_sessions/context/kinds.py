"""Provider kinds, detected by duck typing.

A provider's methods may be plain functions or coroutines; only their presence counts.
"""

from __future__ import annotations

from typing import Any

READONLY = "readonly"
WRITABLE = "writable"
SKILL = "skill"
SEARCH = "search"


def has_method(provider: Any, name: str) -> bool:
    """True when ``provider.name`` exists and is callable."""
    return provider is not None and callable(getattr(provider, name, None))


def kind_of(provider: Any) -> str:
    """``search`` (has ``search``), ``skill`` (has ``load``), ``writable`` (has ``set``) or ``readonly``."""
    if has_method(provider, "search"):
        return SEARCH
    if has_method(provider, "load"):
        return SKILL
    if has_method(provider, "set"):
        return WRITABLE
    return READONLY
