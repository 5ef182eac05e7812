"""The SessionProvider protocol: what any custom storage must offer."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


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
