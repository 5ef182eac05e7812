"""SessionManager: lifecycle, convenience methods, fork, split, usage and cross-session search."""

from __future__ import annotations

import builtins
import threading
import uuid
from collections import OrderedDict
from typing import Any, Self

from django.db import router, transaction

from .. import conf, registry, text
from ..asyncutils import async_twin
from ..models import Message, SessionRecord
from ..session import Session
from ..storage import orm, registration
from ..storage.orm import OMITTED, AppendOutcome
from ..tools import Tool
from ..types import SearchResult, SessionInfo, StoredCompaction
from ..ui_message import UIMessage
from . import clock, rows
from . import fork as forking
from .builder import RecordingBuilder
from .history import HISTORY_DESCRIPTION, SearchableHistoryProvider, session_search_tool

SPLIT_PREFIX = "[Context from previous session]\n\n"


def get_registered(name: str) -> Any:
    """The configuration registered under ``name`` (a named SessionManager, usually), or None."""
    return registry.get(name)


class SessionManager(RecordingBuilder):
    """Named sessions in ``assistant_sessions``, each a :class:`Session` built from one shared configuration.

    ``SessionManager(using=None, name=None)`` starts the builder; a ``name``
    registers the manager so a Celery worker can rebuild its sessions.
    """

    def __init__(self, using: str | None = None, *, name: str | None = None) -> None:
        self._using = using
        self.name = name
        self._calls = []
        self._sessions: OrderedDict[str, Session] = OrderedDict()  # LRU, bounded by conf
        self._lock = threading.Lock()
        if name is not None:
            registry.register(name, self)

    def __repr__(self) -> str:
        return f"SessionManager(using={self._using!r}, name={self.name!r})"

    @property
    def using(self) -> str:
        """The database alias: the one given, or what the routers pick for sessions."""
        return self._using or router.db_for_write(SessionRecord)

    # ── builder ─────────────────────────────────────────────────────
    def with_searchable_history(self, label: str) -> Self:
        """Add a readonly, searchable block over every session's history (its content: a session count)."""
        provider = SearchableHistoryProvider(self._count_sessions, self.search)
        return self._record("with_context", label, description=HISTORY_DESCRIPTION, provider=provider)

    def _configuration_changed(self) -> None:
        with self._lock:
            self._sessions.clear()

    def _count_sessions(self) -> int:
        return SessionRecord.objects.using(self.using).count()

    # ── sessions ────────────────────────────────────────────────────
    def get_session(self, session_id: str) -> Session:
        """The Session for an id, built from this configuration on first use and cached."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                # With a name, auto-compaction runs as a Celery task that rebuilds the session from it.
                session = self.replay(Session.create(using=self._using, config_name=self.name).for_session(session_id))
                self._sessions[session_id] = session
                while len(self._sessions) > conf.session_cache_size():
                    self._sessions.popitem(last=False)  # a long-running process must not grow forever
            else:
                self._sessions.move_to_end(session_id)
            return session

    def _provider(self, session_id: str) -> orm.DjangoSessionProvider:
        return self.get_session(session_id).storage

    # ── lifecycle ───────────────────────────────────────────────────
    def create(
        self,
        name: str,
        *,
        parent_session_id: str | None = None,
        model: str | None = None,
        source: str | None = None,
        owner: Any = None,
    ) -> SessionInfo:
        """Register a new session (id: uuid4 hex); ``owner`` (a user or its pk) sees it in the API, staff see all."""
        row = rows.insert(
            self.using,
            rows.check_text(name, "name"),
            parent_session_id=rows.check_text(parent_session_id, "parent_session_id", optional=True),
            model=rows.check_text(model, "model", optional=True),
            source=rows.check_text(source, "source", optional=True),
            owner_id=registration.owner_pk(owner),
        )
        return rows.to_info(row)

    def get(self, session_id: str) -> SessionInfo | None:
        """The session's registry row, or None."""
        row = rows.fetch(self.using, session_id)
        return rows.to_info(row) if row else None

    def list(self) -> builtins.list[SessionInfo]:
        """Every session, most recently updated first (ties: newest first)."""
        return [rows.to_info(r) for r in SessionRecord.objects.using(self.using).order_by(*rows.LIST_ORDER)]

    def rename(self, session_id: str, name: str) -> None:
        """Rename a session (bumps ``updated_at``)."""
        rows.update(self.using, session_id, name=rows.check_text(name, "name"))

    def delete(self, session_id: str) -> None:
        """Delete the session with its messages, overlays, namespaced context blocks, stored prompt and job row."""
        if not text.storable(session_id):
            return  # no session has this id (NUL, a lone surrogate)
        with transaction.atomic(using=self.using):
            rows.purge(self.using, session_id, self._labels())
        with self._lock:
            self._sessions.pop(session_id, None)

    def _labels(self) -> set[str]:
        """Labels whose exact keys find a session's ownerless rows: this configuration's and every registered one's."""
        return rows.known_labels(self.context_labels())

    def _touch(self, session_id: str) -> None:
        rows.touch(self.using, session_id)

    # ── messages ────────────────────────────────────────────────────
    def _append(self, session: Session, message: UIMessage, parent_id: Any) -> bool:
        """Append with the registry's stamp in the insert's own transaction: one commit, not two
        (a custom provider's session is touched after)."""
        inserted, stamped = session._append(message, parent_id, clock.now())
        if not stamped:
            self._touch(session.session_id)
        return inserted

    def append(self, session_id: str, message: UIMessage, parent_id: Any = OMITTED) -> str:
        """Append like :meth:`Session.append_message`; returns the message id."""
        self._append(self.get_session(session_id), message, parent_id)
        return message["id"]

    def upsert(self, session_id: str, message: UIMessage, parent_id: Any = OMITTED) -> str:
        """Insert the message, or replace the stored one with the same id in place (its parent is kept)."""
        session = self.get_session(session_id)
        if not self._append(session, message, parent_id):
            session.update_message(message)
        return message["id"]

    def append_all(self, session_id: str, messages: builtins.list[UIMessage], parent_id: Any = OMITTED) -> str | None:
        """Append a chain: the first attaches like :meth:`append`, each next one under the one before.

        One transaction, inserted in batches; returns the last id (None for ``[]``).
        """
        messages = list(messages)
        if not messages:
            return None
        session = self.get_session(session_id)
        outcome: AppendOutcome = session.storage.append_messages_bulk(messages, parent_id, registry_stamp=clock.now())
        if outcome.inserted:
            # the auto-compaction check, once per batch
            session.compaction.after_append(messages[-1]["id"], path_tokens=outcome.path_tokens)
        return messages[-1]["id"]

    def get_history(self, session_id: str, leaf_id: str | None = None) -> builtins.list[UIMessage]:
        """Root→leaf path with overlays applied (see :meth:`Session.get_history`)."""
        if not text.storable(session_id):
            return []
        return self.get_session(session_id).get_history(leaf_id)

    def get_message_count(self, session_id: str) -> int:
        """Number of stored messages in the session (every branch)."""
        if not text.storable(session_id):
            return 0
        return Message.objects.using(self.using).filter(session_id=session_id).count()

    def clear_messages(self, session_id: str) -> None:
        """Delete every message and overlay of the session."""
        # Stamped after, not with it: clearing also resets the session's loaded skills and stored
        # prompt in this process, which a rolled-back transaction would not put back.
        self.get_session(session_id).clear_messages()
        self._touch(session_id)

    def delete_messages(self, session_id: str, message_ids: builtins.list[str]) -> None:
        """Delete messages by id (children stay, as roots)."""
        if not text.storable(session_id):
            return
        session = self.get_session(session_id)
        with rows.write_transaction(self.using):
            session.delete_messages(message_ids)
            self._touch(session_id)

    def get_branches(self, session_id: str, message_id: str) -> builtins.list[UIMessage]:
        """Children of a message, oldest first."""
        if not text.storable(session_id):
            return []
        return self.get_session(session_id).get_branches(message_id)

    # ── fork ────────────────────────────────────────────────────────
    def fork(self, session_id: str, at_message_id: str, name: str) -> SessionInfo:
        """Copy the path ending at ``at_message_id`` into a new session (``parent_session_id=session_id``).

        Copies get new ids; :meth:`fork_mapping` maps originals to copies.  The
        fork inherits model and source, the session's namespaced context blocks and
        search entries as they are now, and its frozen prompt (byte-identical, so a
        prompt cache still hits).  Unknown session → SessionNotFound;
        a message not in it → ValueError (nothing is created either way).
        """
        source = rows.fetch_or_raise(self.using, session_id)
        name = rows.check_text(name, "name")
        fork_id = rows.new_id()
        with transaction.atomic(using=self.using):
            if not forking.copy_path(self._provider(session_id), fork_id, at_message_id):
                raise ValueError(f"message {at_message_id!r} is not in session {session_id!r}")
            rows.copy_namespaced(self.using, session_id, fork_id, prompt=True, labels=self._labels())
            # The registry row last, as in compact_and_split: it starts with the copies' count
            # (a trigger) and the registry clock's stamp, so the row returned is the row stored.
            row = rows.insert(
                self.using, name, session_id=fork_id, parent_session_id=session_id, model=source.model,
                source=source.source,
            )  # fmt: skip
        return rows.to_info(row)

    def fork_mapping(self, fork_session_id: str) -> dict[str, str]:
        """``{original message id: copied message id}`` of a fork."""
        if not text.storable(fork_session_id):
            return {}
        return forking.fork_mapping(self.using, fork_session_id)

    # ── compaction ──────────────────────────────────────────────────
    def add_compaction(self, session_id: str, summary: str, from_id: str, to_id: str) -> StoredCompaction:
        """Store an overlay replacing ``from_id..to_id`` with ``summary`` on read."""
        session = self.get_session(session_id)
        with rows.write_transaction(self.using):
            stored = session.add_compaction(summary, from_id, to_id)
            self._touch(session_id)
        return stored

    def get_compactions(self, session_id: str) -> builtins.list[StoredCompaction]:
        """Every overlay of the session, oldest first."""
        if not text.storable(session_id):
            return []
        return self.get_session(session_id).get_compactions()

    def compact_and_split(self, session_id: str, summary: str, name: str | None = None) -> SessionInfo:
        """End the session (``end_reason="compaction"``) and continue in a new one seeded with the summary.

        The continuation inherits name (unless given), model and source, and has
        ``parent_session_id=session_id``; its first message is an assistant
        message ``"[Context from previous session]\\n\\n" + summary``.  Namespaced
        context blocks (memory) and search entries are copied; the frozen prompt is
        not, so the new session renders one from the copied blocks on first use.
        Skills loaded in the old transcript are not loaded in the new one.
        """
        if not isinstance(summary, str):
            raise TypeError("summary must be a string")
        old = rows.fetch_or_raise(self.using, session_id)
        name = old.name if name is None else rows.check_text(name, "name")
        new_id = rows.new_id()
        with transaction.atomic(using=self.using):
            rows.update(self.using, session_id, end_reason="compaction")
            text = {"type": "text", "text": SPLIT_PREFIX + summary}
            provider = self._provider(new_id)
            provider.mark_registered()  # its registry row is written below, with the old one's fields
            provider.append_message({"id": uuid.uuid4().hex, "role": "assistant", "parts": [text]}, None)
            # Blocks carry over; the prompt does not: the summary replaces the transcript in which
            # writes made after freezing were visible, so the new session renders its own on first use.
            rows.copy_namespaced(self.using, session_id, new_id, prompt=False, labels=self._labels())
            # The registry row last: a trigger gives it the message's count, and its stamp comes
            # from the registry's clock, after the old session's, so it lists first.
            row = rows.insert(
                self.using, name, session_id=new_id, parent_session_id=session_id, model=old.model, source=old.source
            )
        return rows.to_info(row)

    # ── usage ───────────────────────────────────────────────────────
    def add_usage(self, session_id: str, input_tokens: int, output_tokens: int, cost: float) -> None:
        """Add token counts and cost with atomic in-database increments (safe under concurrency)."""
        rows.add_usage(self.using, session_id, input_tokens, output_tokens, cost)

    # ── search and tools ────────────────────────────────────────────
    def search(
        self, query: str, *, limit: int = 20, offset: int = 0, role: str | builtins.list[str] | None = None
    ) -> builtins.list[SearchResult]:
        """Messages of every session matching ``query``, best first (with ``session_id``)."""
        return orm.search(query, session_id=None, limit=limit, offset=offset, role=role, using=self._using)

    def tools(self) -> dict[str, Tool]:
        """AI tools of the manager: ``session_search``."""
        tool = session_search_tool(self.search)
        return {tool.name: tool}

    # ── async twins ─────────────────────────────────────────────────
    aget_session = async_twin(get_session)
    acreate = async_twin(create)
    aget = async_twin(get)
    alist = async_twin(list)
    arename = async_twin(rename)
    adelete = async_twin(delete)
    aappend = async_twin(append)
    aupsert = async_twin(upsert)
    aappend_all = async_twin(append_all)
    aget_history = async_twin(get_history)
    aget_message_count = async_twin(get_message_count)
    aclear_messages = async_twin(clear_messages)
    adelete_messages = async_twin(delete_messages)
    aget_branches = async_twin(get_branches)
    afork = async_twin(fork)
    afork_mapping = async_twin(fork_mapping)
    aadd_compaction = async_twin(add_compaction)
    aget_compactions = async_twin(get_compactions)
    acompact_and_split = async_twin(compact_and_split)
    aadd_usage = async_twin(add_usage)
    asearch = async_twin(search)
    atools = async_twin(tools)
