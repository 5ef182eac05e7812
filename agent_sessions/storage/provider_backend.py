"""A :class:`~agent_sessions.storage.base.SessionBackend` over any custom SessionProvider.

The generic behaviour, in one place: sync-or-async calls, the duplicate-id check before an
append, the optional extras (search, recent window, row sizes) or their fallbacks, and the
threshold estimate from the loaded history.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..asyncutils import call
from ..exceptions import SearchNotSupported
from ..tokens import estimate_message_tokens
from ..types import HistoryRowStat, RecentHistory, SearchResult, StoredCompaction, dump_message, validate_message
from .base import OMITTED, AppendOutcome, SessionBackend


def backend_for(storage: Any) -> SessionBackend:
    """The backend a Session calls for ``storage``: the storage itself when its class is one (it says so
    with a ``session_backend()`` method, as DjangoSessionProvider does), else a :class:`ProviderBackend`
    over it.  Looked up on the class, so a proxy that forwards attributes to an ORM provider
    (``__getattr__``) stays a custom storage."""
    if callable(getattr(type(storage), "session_backend", None)):
        return storage.session_backend()
    return ProviderBackend(storage)


class ProviderBackend:
    """The SessionBackend of a custom storage (SPEC §3.8), whose methods may be sync or async."""

    orm = False
    alias = None
    using = None
    stamps_registry = False

    def __init__(self, provider: Any) -> None:
        self._provider = provider
        self.session_id = ""
        self._answers_bool = False  # set once the provider's append returns a bool

    @property
    def provider(self) -> Any:
        return self._provider

    def get_message(self, message_id: str) -> dict | None:
        return call(self._provider.get_message, message_id)

    def get_history(self, leaf_id: str | None = None) -> list[dict]:
        return call(self._provider.get_history, leaf_id)

    def get_raw_path(self, leaf_id: str | None = None) -> list[dict]:
        """The provider's own ``get_raw_path`` when it has one; else its history, which shows the
        overlays it holds now (a custom storage keeps no other view of the stored path)."""
        own = getattr(self._provider, "get_raw_path", None)
        return call(own if own is not None else self._provider.get_history, leaf_id)

    def get_latest_leaf(self) -> dict | None:
        return call(self._provider.get_latest_leaf)

    def get_branches(self, message_id: str) -> list[dict]:
        return call(self._provider.get_branches, message_id)

    def get_path_length(self, leaf_id: str | None = None) -> int:
        return call(self._provider.get_path_length, leaf_id)

    def get_recent_history(
        self, leaf_id: str | None = None, *, max_content_bytes: int, min_recent_messages: int = 1
    ) -> RecentHistory:
        """The provider's own window when it has one, else cut from the loaded history."""
        own = getattr(self._provider, "get_recent_history", None)
        if own is not None:
            return call(own, leaf_id, max_content_bytes=max_content_bytes, min_recent_messages=min_recent_messages)
        return _recent_from_history(self.get_history(leaf_id), max_content_bytes, min_recent_messages)

    def get_history_row_stats(self, leaf_id: str | None = None) -> list[HistoryRowStat]:
        """The provider's own sizes when it has them, else measured on the loaded history."""
        own = getattr(self._provider, "get_history_row_stats", None)
        if own is not None:
            return call(own, leaf_id)
        return [HistoryRowStat(id=m["id"], role=m["role"], bytes=_stored_bytes(m)) for m in self.get_history(leaf_id)]

    def search_messages(
        self, query: str, limit: int = 20, *, offset: int = 0, role: str | list[str] | None = None
    ) -> list[SearchResult]:
        """The provider's ``search_messages(query, limit)`` (``offset`` and ``role`` need the ORM storage)."""
        own = getattr(self._provider, "search_messages", None)
        if own is None:
            raise SearchNotSupported(f"{type(self._provider).__name__} cannot search messages")
        return call(own, query, limit)

    def append_message_stats(
        self, message: dict, parent_id: Any = OMITTED, *, registry_stamp: datetime | None = None
    ) -> AppendOutcome:
        """Append, keeping the duplicate-id contract for any provider (``registry_stamp`` is not stored).

        A provider answering with a bool is trusted (it dedupes itself); one answering
        anything else (None, as the seed's providers do) gets a ``get_message`` check
        first, so a known id returns False and the provider is not called again
        (a provider without ``get_message`` cannot be checked).
        """
        validate_message(message)
        known = not self._answers_bool and hasattr(self._provider, "get_message")
        if known and self.get_message(message["id"]) is not None:
            return AppendOutcome(inserted=False)
        args = (message,) if parent_id is OMITTED else (message, parent_id)
        result = call(self._provider.append_message, *args)
        if isinstance(result, bool):
            self._answers_bool = True
            return AppendOutcome(inserted=result)
        return AppendOutcome(inserted=True)

    def update_message(self, message: dict) -> Any:
        return call(self._provider.update_message, message)

    def delete_messages(self, message_ids: list[str]) -> Any:
        return call(self._provider.delete_messages, message_ids)

    def clear_messages(self) -> Any:
        return call(self._provider.clear_messages)

    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> StoredCompaction:
        return call(self._provider.add_compaction, summary, from_message_id, to_message_id)

    def add_compaction_if_unchanged(
        self, summary: str, from_message_id: str, to_message_id: str, seen: frozenset[str]
    ) -> StoredCompaction | None:
        """A custom storage has no write lock to check ``seen`` under: the overlay is stored."""
        return self.add_compaction(summary, from_message_id, to_message_id)

    def get_compactions(self) -> list[StoredCompaction]:
        return call(self._provider.get_compactions)

    def history_tokens(self, leaf_id: str | None = None, path_tokens: int | None = None) -> int:
        """Estimated from the loaded history (a custom storage keeps no running totals)."""
        return estimate_message_tokens(self.get_history(leaf_id))


def _stored_bytes(message: dict) -> int:
    """UTF-8 size of a message's stored JSON, for providers that cannot tell."""
    return len(dump_message(message).encode("utf-8"))


def _recent_from_history(history: list[dict], max_bytes: int, min_recent: int) -> RecentHistory:
    """Fallback for providers without ``get_recent_history``: cut a loaded history."""
    min_recent = max(1, int(min_recent))
    kept: list[dict] = []
    total = 0
    for index, message in enumerate(reversed(history)):
        size = _stored_bytes(message)
        if index >= min_recent and total + size > max_bytes:
            break
        kept.append(message)
        total += size
    return RecentHistory(messages=list(reversed(kept)), truncated=len(kept) < len(history), total_content_bytes=total)
