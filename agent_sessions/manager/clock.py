"""Strictly increasing timestamps, so ``updated_at`` ties cannot reorder sessions written by one process."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from django.utils import timezone

_lock = threading.Lock()
_last: datetime | None = None


def now() -> datetime:
    """``timezone.now()``, nudged 1 µs past the previous value when the clock has not moved on."""
    global _last
    with _lock:
        current = timezone.now()
        if _last is not None and current <= _last:
            current = _last + timedelta(microseconds=1)
        _last = current
        return current
