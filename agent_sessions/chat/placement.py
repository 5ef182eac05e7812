"""Where a posted chat turn goes in the session's tree, written before the reply streams.

The chat id is the session id (the first POST creates the session, owned by the caller).  Posted
messages not stored yet are appended, each under the message before it in the posted list; a lone
posted message (the client sends only the last one) goes under the session's latest leaf.  Ids
already stored are never written again, except that a client-side tool's output is copied into
the stored assistant message's tool part.  :func:`place` answers which message the reply answers
and where it goes: :func:`check` (reads, before the first byte: 4xx answers still possible) and
:func:`place` (the writes, in one transaction, once the answer has started).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, cast

from django.db import IntegrityError, transaction
from django.http import HttpRequest

from ..api.access import message_exists
from ..api.auth import is_staff
from ..api.errors import ApiError, not_found
from ..manager import SessionManager, rows
from ..session import Session
from ..storage.base import OMITTED
from ..ui_message import UIMessage
from .assemble import is_tool_part
from .request import REGENERATE, ChatRequest

# Client-side tool states the follow-up may carry, and the fields it may set on the stored part.
_CLIENT_STATES = frozenset({"output-available", "output-error", "output-denied", "approval-responded"})
_CLIENT_FIELDS = ("output", "errorText", "approval")
_NAME_CHARS = 80


@dataclass(frozen=True)
class Turn:
    """What the reply answers: the session, the path ``respond`` gets, and where the reply is stored."""

    session: Session
    history: list[dict]
    message_id: str
    parent_id: str
    base: dict | None  # the stored assistant message a tool follow-up continues (None: a new reply)
    using: str


def _title(chat: ChatRequest) -> str:
    """A session name: the first user text posted, cut short (``Chat`` without one)."""
    for message in chat.messages:
        for part in message["parts"] if message["role"] == "user" else []:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                words = " ".join(part["text"].split())
                if words:
                    return words[:_NAME_CHARS]
    return "Chat"


@dataclass(frozen=True)
class Target:
    """What :func:`check` decided before anything is written: the caller may write this chat, and the
    reply's id (the continued assistant message's for a tool follow-up, a new one otherwise)."""

    chat: ChatRequest
    manager: SessionManager
    user: Any
    message_id: str
    exists: bool

    @property
    def continues(self) -> bool:
        """A client-side tool's follow-up: the posted list ends with the assistant message to continue."""
        return self.chat.last["role"] == "assistant" and self.chat.trigger != REGENERATE


def _writable(row: Any, user: Any) -> None:
    """404 for another owner's session (as the API: whether it exists is not said), 409 once it has ended."""
    if not is_staff(user) and row.owner_id != user.pk:
        raise not_found("session")
    if row.end_reason is not None:
        raise ApiError(409, "session_ended", f"The session has ended ({row.end_reason}); start a new chat.")


def check(request: HttpRequest, chat: ChatRequest, manager: SessionManager) -> Target:
    """Read-only, before the answer starts: may the caller write this chat (404 / 409 otherwise)?"""
    user = request.auth
    row = rows.fetch(manager.using, chat.chat_id)
    if row is not None:
        _writable(row, user)
    last = chat.last
    continues = last["role"] == "assistant" and chat.trigger != REGENERATE
    return Target(chat, manager, user, last["id"] if continues else uuid.uuid4().hex, row is not None)


def _open(target: Target) -> None:
    """Create the session for the caller (the first POST), or check again under the write lock."""
    using, chat = target.manager.using, target.chat
    if not target.exists:
        try:
            with transaction.atomic(using=using):
                name = rows.check_text(_title(chat), "name")
                rows.insert(using, name, session_id=chat.chat_id, owner=target.user)
            return
        except IntegrityError:  # another request created it first
            pass
    row = rows.fetch(using, chat.chat_id)
    if row is None:
        raise ApiError(409, "session_gone", "The session was deleted while the request ran.")
    _writable(row, target.user)


def merge_tool_outputs(stored: dict, posted: dict) -> dict:
    """``stored`` with the client's tool results from ``posted`` copied into its pending tool parts."""
    by_call = {p.get("toolCallId"): p for p in posted.get("parts", []) if is_tool_part(p)}
    merged = {**stored, "parts": []}
    for part in stored.get("parts", []):
        client = by_call.get(part.get("toolCallId")) if is_tool_part(part) else None
        if client is not None and client.get("state") in _CLIENT_STATES and part.get("state") != client["state"]:
            part = {**part, "state": client["state"]}
            for key in _CLIENT_FIELDS:
                if key in client:
                    part[key] = client[key]
        merged["parts"].append(part)
    return merged


def _store_posted(session: Session, chat: ChatRequest, manager: SessionManager, *, fresh: bool) -> None:
    """Append the posted messages the session does not hold yet (the newest stored one and all before it are;
    a session created by this request holds none)."""
    sid = session.session_id
    first_new = 0 if fresh else len(chat.messages)
    while first_new > 0 and not message_exists(manager, sid, chat.messages[first_new - 1]["id"]):
        first_new -= 1
    for index in range(first_new, len(chat.messages)):
        if index > 0:
            parent: Any = chat.messages[index - 1]["id"]
        else:
            parent = OMITTED if len(chat.messages) == 1 else None
        session.append_message(cast("UIMessage", chat.messages[index]), parent)  # the storage checks it


def place(target: Target) -> Turn:
    """Store the posted turn (one transaction) and say what the reply answers and where it goes."""
    chat, manager = target.chat, target.manager
    using = manager.using
    with rows.write_transaction(using):
        _open(target)
        session = manager.get_session(chat.chat_id)
        _store_posted(session, chat, manager, fresh=not target.exists)
        last = chat.last
        history = cast("list[dict]", session.get_history(last["id"]))
        if target.continues:
            stored = cast("dict | None", session.get_message(last["id"])) or last
            base = merge_tool_outputs(stored, last)
            if base != stored:
                session.update_message(cast("UIMessage", base))
            history[-1] = base
            rows.touch(using, chat.chat_id)
            parent = history[-2]["id"] if len(history) > 1 else ""
            return Turn(session, history, target.message_id, parent, base, using)
        if last["role"] == "assistant":  # regenerating an assistant message: the reply becomes its sibling
            history = history[:-1]
        if not history:
            raise ApiError(400, "invalid_chat_request", "Nothing to regenerate: no message before the reply.")
        rows.touch(using, chat.chat_id)
    return Turn(session, history, target.message_id, history[-1]["id"], None, using)
