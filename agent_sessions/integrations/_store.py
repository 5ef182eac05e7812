"""The storage side every adapter shares: one session's rows through a SessionManager."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from ..manager import SessionManager, clock
from ..storage import registration
from ..ui_message import UIMessage


class SessionStore:
    """Append chains to, read, pop and clear one session; the admin sees it like any other.

    Writes go through ``manager`` (a default, unconfigured :class:`SessionManager`
    on ``using`` when None), so a configured manager's auto-compaction and
    ``updated_at`` bookkeeping apply. The first write registers the session in
    ``assistant_sessions`` (name = id, ``source``, ``owner``) when no row exists yet;
    an existing row keeps its owner.
    """

    def __init__(
        self, session_id: str, *, using: str | None = None, manager: Any = None, source: str, owner: Any = None
    ) -> None:
        if not isinstance(session_id, str) or not session_id or "\x00" in session_id:
            raise ValueError("session_id must be a non-empty string without NUL characters")
        self.session_id = session_id
        self.manager = manager if manager is not None else SessionManager(using=using)
        self.source = source
        self.owner = owner
        self._registered = False
        self.listeners: list[Callable[[list[dict]], None]] = []
        """Called with each chain of messages once it is stored (a model-call recorder links its replies)."""

    @property
    def session(self) -> Any:
        """The :class:`agent_sessions.Session` behind this store."""
        return self.manager.get_session(self.session_id)

    def register(self) -> None:
        """Create the ``assistant_sessions`` row if it is missing (idempotent, race-safe: one insert that
        leaves an existing row alone)."""
        if self._registered:
            return
        registration.register_using(
            self.manager.using, self.session_id, stamp=clock.now(), owner=self.owner, name=self.session_id,
            source=self.source,
        )  # fmt: skip
        self.session.storage.mark_registered()  # the manager's storage need not look again
        self._registered = True

    def append(self, messages: list[dict]) -> None:
        """Append ``messages`` as a chain under the latest leaf, in one transaction.

        One message (most turns' writes) goes through :meth:`SessionManager.append`: one statement that
        stamps the registry's ``updated_at`` itself, where a chain's transaction sends five.
        """
        if not messages:
            return
        self.register()
        if len(messages) == 1:
            self.manager.append(self.session_id, cast("UIMessage", messages[0]))  # the storage checks it
        else:
            self.manager.append_all(self.session_id, cast("list[UIMessage]", messages))  # the storage checks them
        for listener in self.listeners:
            listener(messages)

    def history(self) -> list[dict]:
        """The latest leaf's root→leaf path, compaction overlays applied."""
        return cast("list[dict]", self.manager.get_history(self.session_id))

    def recent(self, rows: int) -> tuple[list[dict], bool]:
        """The last ``rows`` stored rows of the latest branch (overlays applied) and whether that is all of it.

        Reads only the window, so ``get_items(limit)``-style reads cost what they return.
        """
        recent = self.session.get_recent_history(max_content_bytes=0, min_recent_messages=max(1, rows))
        return recent.messages, not recent.truncated

    def pop_latest(self) -> dict | None:
        """Delete and return the latest leaf; None when the session is empty.

        Under the session's write lock, with the registry stamp in the same commit (one round trip
        on Postgres): a concurrent pop finds the next leaf, so each row is returned by exactly one
        caller.
        """
        return self.session.storage.pop_latest_leaf(clock.now())

    def clear(self) -> None:
        """Delete every message and overlay of the session (its registry row stays)."""
        self.manager.clear_messages(self.session_id)


class StoredHistory:
    """What every adapter shares: a :class:`SessionStore` for ``session_id`` and its accessors."""

    SOURCE = ""
    """The ``assistant_sessions.source`` an adapter's sessions are registered with."""

    def __init__(self, session_id: str, *, using: str | None = None, manager: Any = None, owner: Any = None) -> None:
        self._store = SessionStore(session_id, using=using, manager=manager, source=self.SOURCE, owner=owner)
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_id!r})"

    @property
    def store(self) -> SessionStore:
        """The storage side (its ``session`` is the :class:`agent_sessions.Session`)."""
        return self._store
