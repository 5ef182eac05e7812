"""What a Session asks of its storage.

:class:`SessionProvider` is the protocol any custom storage offers (SPEC §3.8: duck-typed, sync
or async).  :class:`SessionBackend` is what the :class:`~agent_sessions.Session` facade calls: one
typed, synchronous method per operation, each already the best way the storage has to do it.
``DjangoSessionProvider`` is a backend itself (its single-statement append, the threshold estimate
from running totals, range reads); any other provider is wrapped once, when the Session is built,
in :class:`~agent_sessions.storage.provider_backend.ProviderBackend`, which gives the generic
behaviour (see :func:`~agent_sessions.storage.provider_backend.backend_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ..types import HistoryRowStat, RecentHistory, SearchResult, StoredCompaction

OMITTED = object()
"""Sentinel: the caller left ``parent_id`` out (auto-parent to the latest leaf)."""


@dataclass(frozen=True)
class AppendOutcome:
    """What an append did: whether it inserted, under which parent, and the path's totals."""

    inserted: bool
    parent_id: str | None = None
    depth: int | None = None
    path_tokens: int | None = None


@runtime_checkable
class SessionProvider(Protocol):
    """Duck-typed storage for one session's message tree; methods may be sync or async.

    Optional extras a Session uses when present: ``search_messages(query, limit)``,
    ``get_recent_history(leaf_id, max_content_bytes=..., min_recent_messages=...)`` and
    ``get_history_row_stats(leaf_id)``.
    """

    def get_message(self, message_id: str) -> dict | None: ...

    def get_history(self, leaf_id: str | None = None) -> list[dict]: ...

    def get_latest_leaf(self) -> dict | None: ...

    def get_branches(self, message_id: str) -> list[dict]: ...

    def get_path_length(self, leaf_id: str | None = None) -> int: ...

    def append_message(self, message: dict, parent_id: str | None = ...) -> Any: ...

    def update_message(self, message: dict) -> Any: ...

    def delete_messages(self, message_ids: list[str]) -> Any: ...

    def clear_messages(self) -> Any: ...

    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> Any: ...

    def get_compactions(self) -> list[Any]: ...


class SessionBackend(Protocol):
    """The storage operations of one session, as the Session facade and its parts call them.

    Every method is synchronous and complete: no optional extras, no capability checks left
    to the caller.  ``session_id`` is the namespace the Session set (``for_session``).
    """

    session_id: str

    @property
    def provider(self) -> Any:
        """The storage object the Session was given (``Session.storage``)."""
        ...

    @property
    def orm(self) -> bool:
        """True when the rows live in this project's Django database: context blocks and the stored
        prompt are auto-wired there, and compactions take the job row's lease."""
        ...

    @property
    def alias(self) -> str | None:
        """The Django database alias given (None: the routers choose; always None without ``orm``)."""
        ...

    @property
    def using(self) -> str | None:
        """The Django database alias the rows are in (the routers' choice when none was given); None
        without ``orm``."""
        ...

    @property
    def stamps_registry(self) -> bool:
        """Whether ``append_message_stats(registry_stamp=...)`` sets the session's ``updated_at`` with the insert."""
        ...

    def get_message(self, message_id: str) -> dict | None: ...

    def get_history(self, leaf_id: str | None = None) -> list[dict]: ...

    def get_raw_path(self, leaf_id: str | None = None) -> list[dict]:
        """Root→leaf messages as stored, without overlays."""
        ...

    def get_latest_leaf(self) -> dict | None: ...

    def get_branches(self, message_id: str) -> list[dict]: ...

    def get_path_length(self, leaf_id: str | None = None) -> int: ...

    def get_recent_history(
        self, leaf_id: str | None = None, *, max_content_bytes: int, min_recent_messages: int = 1
    ) -> RecentHistory: ...

    def get_history_row_stats(self, leaf_id: str | None = None) -> list[HistoryRowStat]: ...

    def search_messages(
        self, query: str, limit: int = 20, *, offset: int = 0, role: str | list[str] | None = None
    ) -> list[SearchResult]:
        """Raises SearchNotSupported when the storage cannot search."""
        ...

    def append_message_stats(
        self, message: dict, parent_id: Any = OMITTED, *, registry_stamp: datetime | None = None
    ) -> AppendOutcome:
        """Validate and store a message; ``inserted`` False when its id is already stored here."""
        ...

    def update_message(self, message: dict) -> Any: ...

    def delete_messages(self, message_ids: list[str]) -> Any: ...

    def clear_messages(self) -> Any: ...

    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> StoredCompaction: ...

    def add_compaction_if_unchanged(
        self, summary: str, from_message_id: str, to_message_id: str, seen: frozenset[str]
    ) -> StoredCompaction | None:
        """Store an overlay unless the session's overlays are no longer ``seen`` (then None)."""
        ...

    def get_compactions(self) -> list[StoredCompaction]: ...

    def history_tokens(self, leaf_id: str | None = None, path_tokens: int | None = None) -> int:
        """Estimated tokens of the leaf's visible history (overlays applied); ``path_tokens``: the
        running total an append just returned for ``leaf_id``."""
        ...
