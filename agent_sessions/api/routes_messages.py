"""Messages of a session: append, upsert, update, bulk delete, get one, history, branches, leaf, path length."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Status

from ..manager import SessionManager
from ..manager.records import update as touch_record
from ..storage.orm import OMITTED
from .access import message_exists, owned_manager, require_message
from .errors import ApiError, not_found
from .schemas import (
    ERROR_STATUSES,
    AppendIn,
    AppendOut,
    DeletedOut,
    DeleteMessagesIn,
    ErrorOut,
    LeafOut,
    MessageList,
    PathLengthOut,
    UIMessageIn,
    UIMessageOut,
    message_dict,
)

router = Router(tags=["messages"])


def _touch(manager: SessionManager, session_id: str) -> None:
    """Bump ``updated_at`` as the manager's own writes do."""
    touch_record(manager.using, session_id)


def _parent(manager: SessionManager, session_id: str, payload: AppendIn) -> Any:
    """OMITTED when the client left ``parent_id`` out, None for ``null``, else an id that must exist here."""
    if "parent_id" not in payload.model_fields_set:
        return OMITTED
    if payload.parent_id is not None and not message_exists(manager, session_id, payload.parent_id):
        raise ApiError(422, "unknown_parent", "parent_id is not a message of this session.")
    return payload.parent_id


def _open_at_leaf(request: HttpRequest, session_id: str, leaf_id: str | None) -> SessionManager:
    """The manager for an owned session whose ``leaf_id`` (when given) must be one of its messages."""
    manager = owned_manager(request, session_id)
    if leaf_id is not None:
        require_message(manager, session_id, leaf_id)
    return manager


def _open_for_append(request: HttpRequest, session_id: str, payload: AppendIn) -> tuple[SessionManager, Any]:
    """The manager for an owned session, and the payload's checked parent (see ``_parent``)."""
    manager = owned_manager(request, session_id)
    return manager, _parent(manager, session_id, payload)


@router.post(
    "/sessions/{session_id}/messages",
    response={201: AppendOut, 200: AppendOut, ERROR_STATUSES: ErrorOut},
    summary="Append a message",
)
def append_message(request: HttpRequest, session_id: str, payload: AppendIn):
    """201 when stored; 200 with ``inserted: false`` when the id already exists here (nothing changes)."""
    manager, parent = _open_for_append(request, session_id, payload)
    inserted = manager.get_session(session_id).append_message(message_dict(payload.message), parent)
    if inserted:
        _touch(manager, session_id)
    return Status(201 if inserted else 200, {"id": payload.message.id, "inserted": inserted})


@router.put(
    "/sessions/{session_id}/messages",
    response={201: AppendOut, 200: AppendOut, ERROR_STATUSES: ErrorOut},
    summary="Upsert a message",
)
def upsert_message(request: HttpRequest, session_id: str, payload: AppendIn):
    """Insert the message (like append), or replace the stored one with the same id in place (parent kept)."""
    manager, parent = _open_for_append(request, session_id, payload)
    existed = message_exists(manager, session_id, payload.message.id)
    manager.upsert(session_id, message_dict(payload.message), parent)
    return Status(200 if existed else 201, {"id": payload.message.id, "inserted": not existed})


@router.post(
    "/sessions/{session_id}/delete-messages",
    response={200: DeletedOut, ERROR_STATUSES: ErrorOut},
    summary="Delete messages",
)
def delete_messages(request: HttpRequest, session_id: str, payload: DeleteMessagesIn):
    """Delete messages by id (unknown ids are ignored); their children stay, as roots."""
    manager = owned_manager(request, session_id)
    deleted = manager.get_session(session_id).delete_messages(payload.ids)
    _touch(manager, session_id)
    return {"deleted": int(deleted or 0)}


@router.get(
    "/sessions/{session_id}/messages/{path:message_id}",
    response={200: UIMessageOut, ERROR_STATUSES: ErrorOut},
    summary="Get a message",
)
def get_message(request: HttpRequest, session_id: str, message_id: str):
    manager = owned_manager(request, session_id)
    message = manager.get_session(session_id).get_message(message_id)
    if message is None:
        raise not_found("message")
    return message


@router.put(
    "/sessions/{session_id}/messages/{path:message_id}",
    response={200: UIMessageOut, ERROR_STATUSES: ErrorOut},
    summary="Update a message",
)
def update_message(request: HttpRequest, session_id: str, message_id: str, payload: UIMessageIn):
    """Replace a stored message's content (its ``id`` must match the path); search is re-indexed."""
    manager = owned_manager(request, session_id)
    if payload.id != message_id:
        raise ApiError(422, "id_mismatch", "The message's id must match the id in the path.")
    session = manager.get_session(session_id)
    if not session.update_message(message_dict(payload)):
        raise not_found("message")
    _touch(manager, session_id)
    return session.get_message(message_id)


@router.get("/sessions/{session_id}/history", response={200: MessageList, ERROR_STATUSES: ErrorOut}, summary="History")
def get_history(request: HttpRequest, session_id: str, leaf_id: str | None = Query(None)):
    """Root→leaf path of ``leaf_id`` (default: the latest leaf) with compaction summaries applied."""
    manager = _open_at_leaf(request, session_id, leaf_id)
    return {"messages": manager.get_history(session_id, leaf_id)}


@router.get(
    "/sessions/{session_id}/branches", response={200: MessageList, ERROR_STATUSES: ErrorOut}, summary="Branches"
)
def get_branches(request: HttpRequest, session_id: str, message_id: str = Query(...)):
    """Children of ``message_id``, oldest first."""
    manager = owned_manager(request, session_id)
    require_message(manager, session_id, message_id)
    return {"messages": manager.get_branches(session_id, message_id)}


@router.get("/sessions/{session_id}/leaf", response={200: LeafOut, ERROR_STATUSES: ErrorOut}, summary="Latest leaf")
def get_latest_leaf(request: HttpRequest, session_id: str):
    """The most recently appended childless message (``null`` for an empty session)."""
    manager = owned_manager(request, session_id)
    return {"message": manager.get_session(session_id).get_latest_leaf()}


@router.get(
    "/sessions/{session_id}/path-length", response={200: PathLengthOut, ERROR_STATUSES: ErrorOut}, summary="Path length"
)
def get_path_length(request: HttpRequest, session_id: str, leaf_id: str | None = Query(None)):
    """Stored messages from the root to the leaf (no compaction applied)."""
    manager = _open_at_leaf(request, session_id, leaf_id)
    return {"length": manager.get_session(session_id).get_path_length(leaf_id)}
