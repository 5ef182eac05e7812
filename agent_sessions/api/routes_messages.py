"""Messages of a session: append, list, upsert, replace, delete (one, some, all), count, history, branches, leaf."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Status

from ..manager import SessionManager, rows
from ..models import Message
from ..storage.orm import OMITTED
from ..ui_message import UIMessage
from .access import message_exists, owned_manager, require_message, writable_manager
from .errors import ApiError, not_found
from .http import PAGE_LIMIT, PAGE_OFFSET, check_if_match, message_etag, page, page_size, set_location, stored_messages
from .schemas import (
    ERROR_STATUSES,
    MAX_INT,
    NO_NUL_PATTERN,
    PRECONDITION_STATUSES,
    AppendIn,
    AppendOut,
    CountOut,
    DeletedOut,
    DeleteMessagesIn,
    ErrorOut,
    Identifier,
    LeafOut,
    MessagePage,
    PathLengthOut,
    RecentHistoryOut,
    UIMessageOut,
    UIMessagePut,
    message_dict,
)

router = Router(tags=["messages"])


def _parent(manager: SessionManager, session_id: str, payload: AppendIn) -> Any:
    """OMITTED when the client left ``parent_id`` out, None for ``null``, else an id that must exist here."""
    if "parent_id" not in payload.model_fields_set:
        return OMITTED
    if payload.parent_id is not None and not message_exists(manager, session_id, payload.parent_id):
        raise ApiError(404, "parent_not_found", "parent_id is not a message of this session.")
    return payload.parent_id


def _open_at_leaf(request: HttpRequest, session_id: str, leaf_id: str | None) -> SessionManager:
    """The manager for an owned session whose ``leaf_id`` (when given) must be one of its messages."""
    manager = owned_manager(request, session_id)
    if leaf_id is not None:
        require_message(manager, session_id, leaf_id)
    return manager


def _open_for_append(request: HttpRequest, session_id: str, payload: AppendIn) -> tuple[SessionManager, Any]:
    """The manager for an owned session that has not ended, and the payload's checked parent (see ``_parent``)."""
    manager = writable_manager(request, session_id)
    return manager, _parent(manager, session_id, payload)


def _upsert(manager: SessionManager, session_id: str, message: UIMessage, parent: Any) -> bool:
    """Insert, or replace the stored message with that id, and stamp the session, in one transaction;
    True when this call inserted it."""
    with rows.write_transaction(manager.using):
        return _upsert_in_transaction(manager, session_id, message, parent)


def _upsert_in_transaction(manager: SessionManager, session_id: str, message: UIMessage, parent: Any) -> bool:
    """:func:`_upsert`'s writes, for a caller already inside :func:`rows.write_transaction`.

    The insert itself decides (the unique (session, id) key makes one racing
    request the inserter), so ``inserted`` stays truthful under concurrency."""
    session = manager.get_session(session_id)
    inserted = session.append_message(message, parent)
    if not inserted:
        session.update_message(message)
    rows.touch(manager.using, session_id)
    return inserted


def _locked_message(manager: SessionManager, session: Any, message_id: str) -> dict | None:
    """The stored message, its row locked until the transaction ends (so an ``If-Match`` check holds)."""
    Message.objects.using(manager.using).select_for_update().filter(
        session_id=session.session_id, message_id=message_id
    ).exists()
    return session.get_message(message_id)


def _message_location(response: HttpResponse, session_id: str, message_id: str) -> None:
    set_location(response, "sessions", session_id, "messages", message_id)


_WHOLE_LIMIT = Query(None, ge=1, le=MAX_INT, description="Page size (default: all of them).")


@router.post(
    "/sessions/{session_id}/messages",
    response={201: AppendOut, 200: AppendOut, ERROR_STATUSES: ErrorOut},
    summary="Append a message",
)
def append_message(request: HttpRequest, response: HttpResponse, session_id: str, payload: AppendIn):
    """201 (with ``Location``) when stored; 200 with ``inserted: false`` when the id already exists here
    (nothing changes); 409 once the session has ended."""
    manager, parent = _open_for_append(request, session_id, payload)
    with rows.write_transaction(manager.using):
        inserted = manager.get_session(session_id).append_message(message_dict(payload.message), parent)
        if inserted:
            rows.touch(manager.using, session_id)
    _message_location(response, session_id, payload.message.id)
    return Status(201 if inserted else 200, {"id": payload.message.id, "inserted": inserted})


@router.get(
    "/sessions/{session_id}/messages",
    response={200: MessagePage, ERROR_STATUSES: ErrorOut},
    summary="List messages",
)
def list_messages(request: HttpRequest, session_id: str, limit: int | None = PAGE_LIMIT, offset: int = PAGE_OFFSET):
    """Every stored message of every branch, in insertion order (no compaction applied); ``count`` is the total."""
    manager = owned_manager(request, session_id)
    stored = Message.objects.using(manager.using).filter(session_id=session_id)
    size = page_size(limit)
    messages = [row.message for row in stored.order_by("seq")[offset : offset + size]]
    return stored_messages(request, {"messages": messages, "count": stored.count(), "limit": size, "offset": offset})


@router.delete(
    "/sessions/{session_id}/messages",
    response={204: None, ERROR_STATUSES: ErrorOut},
    summary="Clear all messages",
)
def clear_messages(request: HttpRequest, session_id: str):
    """Delete every message and compaction of the session (the session itself stays)."""
    manager = owned_manager(request, session_id)
    manager.clear_messages(session_id)
    return Status(204, None)


@router.put(
    "/sessions/{session_id}/messages",
    response={201: AppendOut, 200: AppendOut, ERROR_STATUSES: ErrorOut},
    summary="Upsert a message (deprecated: PUT /sessions/{session_id}/messages/{message_id})",
    deprecated=True,
)
def upsert_message(request: HttpRequest, session_id: str, payload: AppendIn):
    """Insert the message (like append), or replace the stored one with the same id in place (parent kept)."""
    manager, parent = _open_for_append(request, session_id, payload)
    inserted = _upsert(manager, session_id, message_dict(payload.message), parent)
    return Status(201 if inserted else 200, {"id": payload.message.id, "inserted": inserted})


def _delete_some(request: HttpRequest, session_id: str, payload: DeleteMessagesIn) -> dict:
    manager = owned_manager(request, session_id)
    with rows.write_transaction(manager.using):
        deleted = manager.get_session(session_id).delete_messages(payload.ids)
        rows.touch(manager.using, session_id)
    return {"deleted": int(deleted or 0)}


@router.post(
    "/sessions/{session_id}/message-deletions",
    response={200: DeletedOut, ERROR_STATUSES: ErrorOut},
    summary="Delete messages",
)
def delete_some_messages(request: HttpRequest, session_id: str, payload: DeleteMessagesIn):
    """Delete messages by id (unknown ids are ignored); their children stay, as roots."""
    return _delete_some(request, session_id, payload)


@router.post(
    "/sessions/{session_id}/delete-messages",
    response={200: DeletedOut, ERROR_STATUSES: ErrorOut},
    summary="Delete messages (deprecated: POST /sessions/{session_id}/message-deletions)",
    deprecated=True,
)
def delete_messages(request: HttpRequest, session_id: str, payload: DeleteMessagesIn):
    """Deprecated alias of ``POST /sessions/{session_id}/message-deletions``."""
    return _delete_some(request, session_id, payload)


@router.get(
    "/sessions/{session_id}/message-count",
    response={200: CountOut, ERROR_STATUSES: ErrorOut},
    summary="Message count",
)
def message_count(request: HttpRequest, session_id: str):
    """Stored messages of the session, every branch counted."""
    manager = owned_manager(request, session_id)
    return {"count": manager.get_message_count(session_id)}


@router.get(
    "/sessions/{session_id}/messages/{path:message_id}",
    response={200: UIMessageOut, ERROR_STATUSES: ErrorOut},
    summary="Get a message",
)
def get_message(request: HttpRequest, session_id: str, message_id: str):
    """The stored message, with its ``ETag``."""
    manager = owned_manager(request, session_id)
    message = manager.get_session(session_id).get_message(message_id)
    if message is None:
        raise not_found("message")
    return stored_messages(request, message, etag=message_etag(message))


@router.put(
    "/sessions/{session_id}/messages/{path:message_id}",
    response={200: UIMessageOut, 201: UIMessageOut, PRECONDITION_STATUSES: ErrorOut},
    summary="Put a message",
)
def put_message(
    request: HttpRequest,
    response: HttpResponse,
    session_id: str,
    message_id: str,
    payload: UIMessagePut,
    parent_id: Identifier | None = Query(None, description="Parent of a new message (default: the latest leaf)."),
):
    """Replace the stored message (200; search is re-indexed, the parent kept) or store a new one (201, with
    ``Location``; a new message needs a session that has not ended).  The body's ``id`` may be left out; if
    given it must match the path (422 ``id_mismatch``).
    ``If-Match`` makes it conditional: 412 unless the stored message still has that ETag."""
    if payload.id is not None and payload.id != message_id:
        raise ApiError(422, "id_mismatch", "The message's id must match the id in the path.")
    manager = owned_manager(request, session_id)
    session = manager.get_session(session_id)
    message: UIMessage = {**message_dict(payload), "id": message_id}
    if "If-Match" in request.headers:  # conditional: only ever replaces, under a row lock
        with rows.write_transaction(manager.using):  # the check, the write and the stamp: one transaction
            check_if_match(request, message_etag(_locked_message(manager, session, message_id)))
            inserted = _upsert_in_transaction(manager, session_id, message, OMITTED)
    elif session.get_message(message_id) is None:
        writable_manager(request, session_id)
        if parent_id is not None:
            require_message(manager, session_id, parent_id)
        inserted = _upsert(manager, session_id, message, OMITTED if parent_id is None else parent_id)
    else:
        inserted = _upsert(manager, session_id, message, OMITTED)
    current = session.get_message(message_id)
    response["ETag"] = message_etag(current)
    if inserted:
        _message_location(response, session_id, message_id)
    return Status(201 if inserted else 200, current)


@router.delete(
    "/sessions/{session_id}/messages/{path:message_id}",
    response={204: None, PRECONDITION_STATUSES: ErrorOut},
    summary="Delete a message",
)
def delete_message(request: HttpRequest, session_id: str, message_id: str):
    """Delete one message (its children stay, as roots); ``If-Match`` honoured."""
    manager = owned_manager(request, session_id)
    session = manager.get_session(session_id)
    with rows.write_transaction(manager.using):
        stored = _locked_message(manager, session, message_id)
        if stored is None:
            raise not_found("message")
        check_if_match(request, message_etag(stored))
        session.delete_messages([message_id])
        rows.touch(manager.using, session_id)
    return Status(204, None)


@router.get("/sessions/{session_id}/history", response={200: MessagePage, ERROR_STATUSES: ErrorOut}, summary="History")
def get_history(
    request: HttpRequest,
    session_id: str,
    leaf_id: str | None = Query(None, pattern=NO_NUL_PATTERN),
    limit: int | None = _WHOLE_LIMIT,
    offset: int = PAGE_OFFSET,
):
    """Root→leaf path of ``leaf_id`` (default: the latest leaf) with compaction summaries applied: all of it, or
    the page ``limit``/``offset`` counts from the root (``count`` is the whole path's length)."""
    manager = _open_at_leaf(request, session_id, leaf_id)
    messages, count, size = page(manager.get_history(session_id, leaf_id), limit, offset, whole=True)
    return stored_messages(request, {"messages": messages, "count": count, "limit": size, "offset": offset})


@router.get(
    "/sessions/{session_id}/recent-history",
    response={200: RecentHistoryOut, ERROR_STATUSES: ErrorOut},
    summary="Recent history",
)
def get_recent_history(
    request: HttpRequest,
    session_id: str,
    max_content_bytes: int = Query(..., ge=0, le=MAX_INT, description="Budget of stored bytes for the window."),
    leaf_id: str | None = Query(None, pattern=NO_NUL_PATTERN),
    min_recent_messages: int = Query(1, ge=1, le=10_000),
):
    """The longest recent part of the path whose stored size fits ``max_content_bytes`` (at least
    ``min_recent_messages`` messages), overlays applied inside the window."""
    manager = _open_at_leaf(request, session_id, leaf_id)
    recent = manager.get_session(session_id).get_recent_history(
        leaf_id, max_content_bytes=max_content_bytes, min_recent_messages=min_recent_messages
    )
    return stored_messages(
        request,
        {
            "messages": recent.messages,
            "truncated": recent.truncated,
            "total_content_bytes": recent.total_content_bytes,
        },
    )


@router.get(
    "/sessions/{session_id}/branches", response={200: MessagePage, ERROR_STATUSES: ErrorOut}, summary="Branches"
)
def get_branches(
    request: HttpRequest,
    session_id: str,
    message_id: str = Query(..., pattern=NO_NUL_PATTERN),
    limit: int | None = _WHOLE_LIMIT,
    offset: int = PAGE_OFFSET,
):
    """Children of ``message_id``, oldest first (all, or the page ``limit``/``offset``; ``count`` is the total)."""
    manager = owned_manager(request, session_id)
    require_message(manager, session_id, message_id)
    messages, count, size = page(manager.get_branches(session_id, message_id), limit, offset, whole=True)
    return stored_messages(request, {"messages": messages, "count": count, "limit": size, "offset": offset})


@router.get("/sessions/{session_id}/leaf", response={200: LeafOut, ERROR_STATUSES: ErrorOut}, summary="Latest leaf")
def get_latest_leaf(request: HttpRequest, session_id: str):
    """The most recently appended childless message (``null`` for an empty session)."""
    manager = owned_manager(request, session_id)
    return stored_messages(request, {"message": manager.get_session(session_id).get_latest_leaf()})


@router.get(
    "/sessions/{session_id}/path-length", response={200: PathLengthOut, ERROR_STATUSES: ErrorOut}, summary="Path length"
)
def get_path_length(request: HttpRequest, session_id: str, leaf_id: str | None = Query(None, pattern=NO_NUL_PATTERN)):
    """Stored messages from the root to the leaf (no compaction applied)."""
    manager = _open_at_leaf(request, session_id, leaf_id)
    return {"length": manager.get_session(session_id).get_path_length(leaf_id)}
