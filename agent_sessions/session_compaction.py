"""Compaction of a Session: overlays, manual ``compact()`` and auto-compaction (SPEC §3.6).

STUB: overlays only; filled in by the compaction work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .asyncutils import call
from .types import StoredCompaction


class CompactionMixin:
    """Compaction half of :class:`~agent_sessions.Session`."""

    def _init_compaction(self, *, token_counter: Callable | None, on_compaction_error: Callable | None) -> None:
        self._compact_fn: Callable | None = None
        self._compact_threshold: int | None = None
        self._token_counter = token_counter
        self._on_compaction_error = on_compaction_error

    def _after_append(self, outcome: Any) -> None:
        """Hook run after an insert: the auto-compaction check."""

    def on_compaction(self, fn: Callable):
        """Set the compaction function ``fn(messages, context) -> CompactResult | None`` (builder)."""
        self._compact_fn = fn
        return self

    def compact_after(self, threshold: int, token_counter: Callable | None = None):
        """Compact automatically once the estimated tokens exceed ``threshold`` (builder)."""
        self._compact_threshold = int(threshold)
        if token_counter is not None:
            self._token_counter = token_counter
        return self

    def on_compaction_error(self, handler: Callable):
        """Receive errors of auto-compaction (builder); a failing handler is swallowed."""
        self._on_compaction_error = handler
        return self

    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> StoredCompaction:
        """Store an overlay replacing ``from..to`` with ``summary`` on read."""
        return call(self.storage.add_compaction, summary, from_message_id, to_message_id)

    def get_compactions(self) -> list[StoredCompaction]:
        """Every stored overlay, oldest first."""
        return call(self.storage.get_compactions)
