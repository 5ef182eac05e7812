"""Ownership: a caller sees the sessions it owns (staff see all); anything else is a 404."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest

from ..manager import SessionManager
from ..manager.rows import LIST_ORDER
from ..models import SessionRecord
from ..storage import session_rows
from .auth import is_staff
from .config import get_manager
from .errors import ApiError, not_found


def caller(request: HttpRequest) -> Any:
    """The authenticated user (set by the auth classes)."""
    return request.auth


def visible_sessions(request: HttpRequest, manager: SessionManager | None = None) -> QuerySet[SessionRecord]:
    """Registry rows the caller may see, newest first."""
    manager = manager or get_manager()
    rows = SessionRecord.objects.using(manager.using).order_by(*LIST_ORDER)
    user = caller(request)
    return rows if is_staff(user) else rows.filter(owner_id=user.pk)


def owned_record(
    request: HttpRequest, session_id: str, manager: SessionManager | None = None, *, lock: bool = False
) -> SessionRecord:
    """The caller's session row, or a 404 (the same whether it is missing or someone else's).

    ``lock``: ``SELECT … FOR UPDATE`` (inside a transaction), so a precondition checked on the row holds
    until the write."""
    rows = visible_sessions(request, manager)
    row = (rows.select_for_update() if lock else rows).filter(id=session_id).first()
    if row is None:
        raise not_found("session")
    return row


def _end_reason(request: HttpRequest, session_id: str, manager: SessionManager) -> str | None:
    """The caller's session's ``end_reason`` (None while open), or a 404; one short statement."""
    user = caller(request)
    state = session_rows.session_state(manager.using, session_id, owner_id=None if is_staff(user) else user.pk)
    if state is None:
        raise not_found("session")
    return state.end_reason


def owned_manager(request: HttpRequest, session_id: str) -> SessionManager:
    """The API's manager, after checking the caller owns the session (a 404 otherwise)."""
    manager = get_manager()
    _end_reason(request, session_id, manager)
    return manager


def writable_manager(request: HttpRequest, session_id: str) -> SessionManager:
    """Like :func:`owned_manager`, but 409 once the session has ended (split or ended explicitly)."""
    manager = get_manager()
    end_reason = _end_reason(request, session_id, manager)
    if end_reason is not None:
        raise ApiError(
            409, "session_ended", f"The session has ended ({end_reason}); continue in a new or split session."
        )
    return manager


def require_message(manager: SessionManager, session_id: str, message_id: str) -> None:
    """404 unless the message is stored in the session."""
    if not message_exists(manager, session_id, message_id):
        raise not_found("message")


def message_exists(manager: SessionManager, session_id: str, message_id: str) -> bool:
    """Whether the session stores a message with that id (one indexed lookup)."""
    return session_rows.message_exists(manager.using, session_id, message_id)


def set_owner(request: HttpRequest, manager: SessionManager, session_id: str) -> SessionRecord:
    """Make the caller the owner of a session the API just created; returns the row."""
    SessionRecord.objects.using(manager.using).filter(id=session_id).update(owner=caller(request))
    return SessionRecord.objects.using(manager.using).get(id=session_id)


def search_owner(request: HttpRequest) -> Any:
    """Whose sessions a cross-session search may return: the caller's id (None for staff, who see every one)."""
    user = caller(request)
    return None if is_staff(user) else user.pk
