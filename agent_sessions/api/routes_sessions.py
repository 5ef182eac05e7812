"""Sessions: create, list (paginated), get, rename, delete, fork, compact-and-split, usage."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest
from ninja import Query, Router, Status

from .. import conf
from .access import owned_manager, owned_record, require_message, set_owner, visible_sessions
from .config import get_manager
from .errors import ApiError
from .schemas import (
    ERROR_STATUSES,
    MAX_INT,
    ErrorOut,
    ForkIn,
    SessionCreate,
    SessionOut,
    SessionPage,
    SessionRename,
    SplitIn,
    UsageIn,
)

router = Router(tags=["sessions"])


@router.post("/sessions", response={201: SessionOut, ERROR_STATUSES: ErrorOut}, summary="Create a session")
def create_session(request: HttpRequest, payload: SessionCreate):
    """A new session owned by the caller (``parent_session_id`` must be one of the caller's sessions)."""
    manager = get_manager()
    if (
        payload.parent_session_id is not None
        and not visible_sessions(request, manager).filter(id=payload.parent_session_id).exists()
    ):
        raise ApiError(422, "unknown_parent_session", "parent_session_id is not one of your sessions.")
    with transaction.atomic(using=manager.using):
        info = manager.create(
            payload.name, parent_session_id=payload.parent_session_id, model=payload.model, source=payload.source
        )
        row = set_owner(request, manager, info.id)
    return Status(201, row)


@router.get("/sessions", response={200: SessionPage, ERROR_STATUSES: ErrorOut}, summary="List sessions")
def list_sessions(
    request: HttpRequest,
    limit: int = Query(50, ge=1, le=MAX_INT, description="Page size (capped by AGENT_SESSIONS_API_MAX_PAGE_SIZE)."),
    offset: int = Query(0, ge=0, le=MAX_INT),
):
    """The caller's sessions, most recently updated first."""
    limit = min(limit, conf.api_max_page_size())
    rows = visible_sessions(request)
    return {"items": list(rows[offset : offset + limit]), "count": rows.count(), "limit": limit, "offset": offset}


@router.get("/sessions/{session_id}", response={200: SessionOut, ERROR_STATUSES: ErrorOut}, summary="Get a session")
def get_session(request: HttpRequest, session_id: str):
    return owned_record(request, session_id)


@router.patch(
    "/sessions/{session_id}", response={200: SessionOut, ERROR_STATUSES: ErrorOut}, summary="Rename a session"
)
def rename_session(request: HttpRequest, session_id: str, payload: SessionRename):
    manager = owned_manager(request, session_id)
    manager.rename(session_id, payload.name)
    return owned_record(request, session_id, manager)


@router.delete("/sessions/{session_id}", response={204: None, ERROR_STATUSES: ErrorOut}, summary="Delete a session")
def delete_session(request: HttpRequest, session_id: str):
    """Deletes its messages, compactions, context blocks and stored prompt too."""
    manager = owned_manager(request, session_id)
    manager.delete(session_id)
    return Status(204, None)


@router.post(
    "/sessions/{session_id}/fork", response={201: SessionOut, ERROR_STATUSES: ErrorOut}, summary="Fork at a message"
)
def fork_session(request: HttpRequest, session_id: str, payload: ForkIn):
    """Copy the path up to ``at_message_id`` into a new session of the caller (``parent_session_id`` = this one)."""
    manager = owned_manager(request, session_id)
    require_message(manager, session_id, payload.at_message_id)
    with transaction.atomic(using=manager.using):
        info = manager.fork(session_id, payload.at_message_id, payload.name)
        row = set_owner(request, manager, info.id)
    return Status(201, row)


@router.post(
    "/sessions/{session_id}/split",
    response={201: SessionOut, ERROR_STATUSES: ErrorOut},
    summary="Compact and split",
)
def compact_and_split(request: HttpRequest, session_id: str, payload: SplitIn):
    """End this session (``end_reason="compaction"``) and continue in a new one seeded with ``summary``."""
    manager = owned_manager(request, session_id)
    with transaction.atomic(using=manager.using):
        info = manager.compact_and_split(session_id, payload.summary, payload.name)
        row = set_owner(request, manager, info.id)
    return Status(201, row)


@router.post("/sessions/{session_id}/usage", response={200: SessionOut, ERROR_STATUSES: ErrorOut}, summary="Add usage")
def add_usage(request: HttpRequest, session_id: str, payload: UsageIn):
    """Add token counts and cost (atomic increments); returns the updated session."""
    manager = owned_manager(request, session_id)
    manager.add_usage(session_id, payload.input_tokens, payload.output_tokens, payload.cost)
    return owned_record(request, session_id, manager)
