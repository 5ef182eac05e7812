"""Session: the builder and the message operations of one conversation (SPEC §3.2).

Context blocks and the system prompt live in :mod:`agent_sessions.session_context`,
compaction in :mod:`agent_sessions.session_compaction`; ``Session`` composes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .asyncutils import call, with_async_twins
from .exceptions import SearchNotSupported
from .session_compaction import CompactionMixin
from .session_context import ContextConfig, ContextMixin
from .storage.orm import OMITTED, AppendOutcome, DjangoSessionProvider
from .tool_results import ToolResultMixin
from .types import HistoryRowStat, RecentHistory, SearchResult, check_id_length, dump_message, validate_message

_ASYNC = (
    "append_message",
    "update_message",
    "delete_messages",
    "clear_messages",
    "get_history",
    "get_message",
    "get_latest_leaf",
    "get_path_length",
    "get_branches",
    "get_recent_history",
    "get_history_row_stats",
    "search",
    "add_tool_result",
)


@with_async_twins(*_ASYNC)
class Session(ContextMixin, CompactionMixin, ToolResultMixin):
    """One conversation: a message tree, its context blocks, prompt and compaction.

    Build it with :meth:`create` and the ``with_*`` / ``on_*`` builder methods
    (order does not matter; providers resolve on first use), or construct it
    directly with a storage object.
    """

    def __init__(
        self,
        storage: Any,
        *,
        context: list[ContextConfig] | None = None,
        prompt_store: Any = None,
        token_counter: Callable[..., Any] | None = None,
        on_compaction_error: Callable[..., Any] | None = None,
    ) -> None:
        self._storage = storage
        self._using: str | None = getattr(storage, "_using", None)
        self._session_id: str | None = None
        self._provider_answers_bool = False  # set once a custom provider's append returns a bool
        self._init_context(list(context or []), prompt_store)
        self._init_compaction(token_counter=token_counter, on_compaction_error=on_compaction_error)

    # ── builder ─────────────────────────────────────────────────────
    @classmethod
    def create(cls, storage: Any = None, *, using: str | None = None) -> Session:
        """A builder on ``storage``, or on the Django ORM (alias ``using``) when None."""
        return cls(storage if storage is not None else DjangoSessionProvider("", using=using))

    def for_session(self, session_id: str) -> Session:
        """Namespace this session: messages, memory blocks and the stored prompt are keyed by it."""
        if not isinstance(session_id, str) or "\x00" in session_id:
            raise ValueError("session_id must be a string without NUL characters")
        check_id_length(session_id, "session id")
        self._session_id = session_id
        if isinstance(self._storage, DjangoSessionProvider):
            self._storage.session_id = session_id
        self._reset_context_resolution()
        return self

    # ── plumbing ────────────────────────────────────────────────────
    @property
    def storage(self) -> Any:
        """The SessionProvider behind this session."""
        return self._storage

    @property
    def session_id(self) -> str:
        """The namespace given to :meth:`for_session` (or the ORM provider's), ``""`` by default."""
        if self._session_id is not None:
            return self._session_id
        return getattr(self._storage, "session_id", "") if self._is_orm else ""

    @property
    def _is_orm(self) -> bool:
        return isinstance(self._storage, DjangoSessionProvider)

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return call(getattr(self._storage, name), *args, **kwargs)

    # ── messages ────────────────────────────────────────────────────
    def append_message(self, message: dict, parent_id: Any = OMITTED) -> bool:
        """Store a message; True if inserted, False if its id already exists here.

        ``parent_id`` omitted → child of the latest leaf; ``None`` → a new root;
        a string → child of that message (a root if it is not in this session).
        """
        if self._is_orm:
            outcome = self._storage.append_message_stats(message, parent_id)
        else:
            outcome = self._append_custom(message, parent_id)
        if outcome.inserted:
            self._after_append(outcome, message)
        return outcome.inserted

    def _append_custom(self, message: dict, parent_id: Any) -> AppendOutcome:
        """Append through a custom provider, keeping the duplicate-id contract for any provider.

        A provider answering with a bool is trusted (it dedupes itself); one answering
        anything else (None, as the seed's providers do) gets a ``get_message`` check
        first, so a known id returns False and the provider is not called again
        (a provider without ``get_message`` cannot be checked).
        """
        validate_message(message)
        known = not self._provider_answers_bool and hasattr(self._storage, "get_message")
        if known and self._call("get_message", message["id"]) is not None:
            return AppendOutcome(inserted=False)
        args = (message,) if parent_id is OMITTED else (message, parent_id)
        result = self._call("append_message", *args)
        if isinstance(result, bool):
            self._provider_answers_bool = True
            return AppendOutcome(inserted=result)
        return AppendOutcome(inserted=True)

    def update_message(self, message: dict) -> Any:
        """Replace a stored message (matched by id); search is re-indexed."""
        validate_message(message)
        return self._call("update_message", message)

    def delete_messages(self, message_ids: list[str]) -> Any:
        """Delete messages by id; their children stay as roots of their subtrees."""
        return self._call("delete_messages", list(message_ids))

    def clear_messages(self) -> None:
        """Delete every message and overlay, forget loaded skills, refresh a stored prompt."""
        self._call("clear_messages")
        self._after_clear()

    def get_history(self, leaf_id: str | None = None) -> list[dict]:
        """Root→leaf path (latest leaf by default) with compaction overlays applied; ``[]`` if unknown."""
        return self._call("get_history", leaf_id)

    def get_message(self, message_id: str) -> dict | None:
        """One stored message, or None."""
        return self._call("get_message", message_id)

    def get_latest_leaf(self) -> dict | None:
        """The most recently appended childless message, or None."""
        return self._call("get_latest_leaf")

    def get_path_length(self, leaf_id: str | None = None) -> int:
        """Stored messages from the root to the leaf (no overlays)."""
        return int(self._call("get_path_length", leaf_id))

    def get_branches(self, message_id: str) -> list[dict]:
        """Children of a message, oldest first."""
        return self._call("get_branches", message_id)

    def get_recent_history(
        self, leaf_id: str | None = None, *, max_content_bytes: int, min_recent_messages: int = 1
    ) -> RecentHistory:
        """The longest recent suffix of the path whose stored sizes fit ``max_content_bytes``."""
        if hasattr(self._storage, "get_recent_history"):
            return self._call(
                "get_recent_history",
                leaf_id,
                max_content_bytes=max_content_bytes,
                min_recent_messages=min_recent_messages,
            )
        return _recent_from_history(self.get_history(leaf_id), max_content_bytes, min_recent_messages)

    def get_history_row_stats(self, leaf_id: str | None = None) -> list[HistoryRowStat]:
        """``HistoryRowStat(id, role, bytes)`` per stored message on the path."""
        if hasattr(self._storage, "get_history_row_stats"):
            return self._call("get_history_row_stats", leaf_id)
        return [
            HistoryRowStat(id=m["id"], role=m["role"], bytes=_stored_bytes(m))
            for m in self._call("get_history", leaf_id)
        ]

    def search(
        self, query: str, *, limit: int = 20, offset: int = 0, role: str | list[str] | None = None
    ) -> list[SearchResult]:
        """Messages of this session matching ``query``, best first.

        Words are ANDed; ``"phrases"``, ``OR`` and ``-excluded`` work as on web search
        engines; CJK text matches by substring. ``offset``/``role`` need the ORM storage.
        """
        if not hasattr(self._storage, "search_messages"):
            raise SearchNotSupported(f"{type(self._storage).__name__} cannot search messages")
        if self._is_orm:
            return self._storage.search_messages(query, limit, offset=offset, role=role)
        return self._call("search_messages", query, limit)


def _stored_bytes(message: dict) -> int:
    """UTF-8 size of a message's stored JSON (SPEC §3.1), for providers that cannot tell."""
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
