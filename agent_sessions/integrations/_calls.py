"""What every model-call recorder shares: linking a record to its reply once the adapter stores it."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from threading import Lock
from typing import Any

from ._store import SessionStore


class ReplyLinks:
    """Records whose replies the adapter has not stored yet, by a key the stored message carries.

    ``key_of(message)`` is that key of a stored UIMessage (or None). When a chain the store
    writes holds a reply, the record is linked to the first of its messages and forgotten.
    """

    def __init__(self, store: SessionStore, key_of: Callable[[dict], Hashable | None]) -> None:
        self._store = store
        self._key_of = key_of
        self._pending: dict[Hashable, str] = {}
        self._lock = Lock()
        store.listeners.append(self._stored)

    def expect(self, keys: Iterable[Any], call_id: str) -> None:
        """The reply of ``call_id`` is the stored message that carries any of ``keys``."""
        with self._lock:
            for key in keys:
                if key is not None:
                    self._pending[key] = call_id

    def _stored(self, messages: list[dict]) -> None:
        for message in messages:
            key = self._key_of(message)
            with self._lock:
                call_id = self._pending.pop(key, None) if key is not None else None
                if call_id is not None:  # its other keys (a reply of several items) are done too
                    self._pending = {k: c for k, c in self._pending.items() if c != call_id}
            if call_id is not None:
                self._store.session.link_model_call(call_id, message["id"])
