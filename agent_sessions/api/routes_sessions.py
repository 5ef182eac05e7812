"""Sessions: create, list (filtered, paginated), get, rename, delete, children, fork, split, end, usage."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema, Status

from ..manager.rows import update as update_record
from ..models import SessionRecord
from .access import owned_manager, owned_record, require_message, set_owner, visible_sessions
from .config import get_manager
from .errors import ApiError
from .http import PAGE_LIMIT, PAGE_OFFSET, check_if_match, page_size, session_etag, set_location
from .schemas import (
    ERROR_STATUSES,
    PRECONDITION_STATUSES,
    ErrorOut,
    ForkIn,
    ForkMappingOut,
    IsoDateTime,
    SessionCreate,
    SessionEndIn,
    SessionOut,
    SessionPage,
    SessionRename,
    SplitIn,
    Text,
    UsageIn,
    UsageOut,
)

router = Router(tags=["sessions"])


class SessionFilters(Schema):
    """Filters of ``GET /sessions`` (all optional, combined with AND)."""

    name: Text | None = None
    name_contains: Text | None = None
    model: Text | None = None
    source: Text | None = None
    parent_session_id: Text | None = None
    ended: bool | None = None
    created_after: IsoDateTime | None = None
    created_before: IsoDateTime | None = None
    updated_after: IsoDateTime | None = None
    updated_before: IsoDateTime | None = None


def _filtered(rows: QuerySet[SessionRecord], f: SessionFilters) -> QuerySet[SessionRecord]:
    lookups = {
        "name": f.name,
        "name__icontains": f.name_contains,
        "model": f.model,
        "source": f.source,
        "parent_session_id": f.parent_session_id,
        "created_at__gte": f.created_after,
        "created_at__lt": f.created_before,
        "updated_at__gte": f.updated_after,
        "updated_at__lt": f.updated_before,
    }
    rows = rows.filter(**{k: v for k, v in lookups.items() if v is not None})
    if f.ended is not None:
        rows = rows.filter(end_reason__isnull=not f.ended)
    return rows


def _page(rows: QuerySet[SessionRecord], limit: int | None, offset: int) -> dict:
    size = page_size(limit)
    return {"items": list(rows[offset : offset + size]), "count": rows.count(), "limit": size, "offset": offset}


def _created(response: HttpResponse, row: SessionRecord) -> Status:
    set_location(response, "sessions", row.id)
    response["ETag"] = session_etag(row)
    return Status(201, row)


def _current(request: HttpRequest, response: HttpResponse, session_id: str, manager=None) -> SessionRecord:
    row = owned_record(request, session_id, manager)
    response["ETag"] = session_etag(row)
    return row


@router.post("/sessions", response={201: SessionOut, ERROR_STATUSES: ErrorOut}, summary="Create a session")
def create_session(request: HttpRequest, response: HttpResponse, payload: SessionCreate):
    """A new session owned by the caller (``parent_session_id`` must be one of the caller's sessions).

    ``Location`` names the new session."""
    manager = get_manager()
    if (
        payload.parent_session_id is not None
        and not visible_sessions(request, manager).filter(id=payload.parent_session_id).exists()
    ):
        raise ApiError(404, "parent_session_not_found", "parent_session_id is not one of your sessions.")
    with transaction.atomic(using=manager.using):
        info = manager.create(
            payload.name, parent_session_id=payload.parent_session_id, model=payload.model, source=payload.source
        )
        row = set_owner(request, manager, info.id)
    return _created(response, row)


@router.get("/sessions", response={200: SessionPage, ERROR_STATUSES: ErrorOut}, summary="List sessions")
def list_sessions(
    request: HttpRequest, filters: Query[SessionFilters], limit: int | None = PAGE_LIMIT, offset: int = PAGE_OFFSET
):
    """The caller's sessions, most recently updated first; ``count`` is the total matching the filters."""
    return _page(_filtered(visible_sessions(request), filters), limit, offset)


@router.get("/sessions/{session_id}", response={200: SessionOut, ERROR_STATUSES: ErrorOut}, summary="Get a session")
def get_session(request: HttpRequest, response: HttpResponse, session_id: str):
    """The session, with its ``ETag`` (send it back in ``If-Match`` to change it safely)."""
    return _current(request, response, session_id)


@router.patch(
    "/sessions/{session_id}",
    response={200: SessionOut, PRECONDITION_STATUSES: ErrorOut},
    summary="Rename a session",
)
def rename_session(request: HttpRequest, response: HttpResponse, session_id: str, payload: SessionRename):
    """Rename; with ``If-Match``, only if the session is unchanged since that ETag (412 otherwise)."""
    manager = get_manager()
    with transaction.atomic(using=manager.using):
        row = owned_record(request, session_id, manager, lock=True)
        check_if_match(request, session_etag(row))
        manager.rename(session_id, payload.name)
    return _current(request, response, session_id, manager)


@router.delete(
    "/sessions/{session_id}", response={204: None, PRECONDITION_STATUSES: ErrorOut}, summary="Delete a session"
)
def delete_session(request: HttpRequest, session_id: str):
    """Deletes its messages, compactions, context blocks and stored prompt too (``If-Match`` honoured)."""
    manager = get_manager()
    check_if_match(request, session_etag(owned_record(request, session_id, manager)))
    manager.delete(session_id)
    return Status(204, None)


@router.get(
    "/sessions/{session_id}/children",
    response={200: SessionPage, ERROR_STATUSES: ErrorOut},
    summary="Child sessions",
)
def list_children(request: HttpRequest, session_id: str, limit: int | None = PAGE_LIMIT, offset: int = PAGE_OFFSET):
    """The caller's sessions whose ``parent_session_id`` is this one (forks and continuations)."""
    owned_record(request, session_id)
    return _page(visible_sessions(request).filter(parent_session_id=session_id), limit, offset)


def _fork(request: HttpRequest, response: HttpResponse, session_id: str, payload: ForkIn) -> Status:
    manager = owned_manager(request, session_id)
    require_message(manager, session_id, payload.at_message_id)
    with transaction.atomic(using=manager.using):
        info = manager.fork(session_id, payload.at_message_id, payload.name)
        row = set_owner(request, manager, info.id)
    return _created(response, row)


@router.post(
    "/sessions/{session_id}/forks",
    response={201: SessionOut, ERROR_STATUSES: ErrorOut},
    summary="Fork at a message",
)
def create_fork(request: HttpRequest, response: HttpResponse, session_id: str, payload: ForkIn):
    """Copy the path up to ``at_message_id`` into a new session of the caller (``parent_session_id`` = this one)."""
    return _fork(request, response, session_id, payload)


@router.post(
    "/sessions/{session_id}/fork",
    response={201: SessionOut, ERROR_STATUSES: ErrorOut},
    summary="Fork at a message (deprecated: POST /sessions/{session_id}/forks)",
    deprecated=True,
)
def fork_session(request: HttpRequest, response: HttpResponse, session_id: str, payload: ForkIn):
    """Deprecated alias of ``POST /sessions/{session_id}/forks``, kept for one release."""
    return _fork(request, response, session_id, payload)


@router.get(
    "/sessions/{session_id}/fork-mapping",
    response={200: ForkMappingOut, ERROR_STATUSES: ErrorOut},
    summary="Fork mapping",
)
def fork_mapping(request: HttpRequest, session_id: str):
    """For a fork: which message of the parent session each copied message came from."""
    manager = get_manager()
    row = owned_record(request, session_id, manager)
    mapping = manager.fork_mapping(session_id)
    return {"session_id": session_id, "parent_session_id": row.parent_session_id, "mapping": mapping}


@router.post(
    "/sessions/{session_id}/split",
    response={201: SessionOut, ERROR_STATUSES: ErrorOut},
    summary="Compact and split",
)
def compact_and_split(request: HttpRequest, response: HttpResponse, session_id: str, payload: SplitIn):
    """End this session (``end_reason="compaction"``) and continue in a new one seeded with ``summary``.

    ``Location`` names the continuation; the ended session refuses new messages (409)."""
    manager = owned_manager(request, session_id)
    with transaction.atomic(using=manager.using):
        info = manager.compact_and_split(session_id, payload.summary, payload.name)
        row = set_owner(request, manager, info.id)
    return _created(response, row)


@router.post(
    "/sessions/{session_id}/end",
    response={200: SessionOut, PRECONDITION_STATUSES: ErrorOut},
    summary="End a session",
)
def end_session(request: HttpRequest, response: HttpResponse, session_id: str, payload: SessionEndIn | None = None):
    """Mark the session ended (``end_reason``, default ``"ended"``) without splitting; it then refuses new
    messages (409).  Ending an ended session again is 409 too."""
    manager = get_manager()
    reason = payload.reason if payload is not None else "ended"
    with transaction.atomic(using=manager.using):
        row = owned_record(request, session_id, manager, lock=True)
        check_if_match(request, session_etag(row))
        if row.end_reason is not None:
            raise ApiError(409, "session_ended", f"The session has already ended ({row.end_reason}).")
        update_record(manager.using, session_id, end_reason=reason)
    return _current(request, response, session_id, manager)


def _usage(row: SessionRecord) -> dict:
    return {
        "input_tokens": int(row.input_tokens or 0),
        "output_tokens": int(row.output_tokens or 0),
        "estimated_cost": float(row.estimated_cost or 0),
    }


@router.get("/sessions/{session_id}/usage", response={200: UsageOut, ERROR_STATUSES: ErrorOut}, summary="Usage")
def get_usage(request: HttpRequest, session_id: str):
    """Token counts and estimated cost added so far."""
    return _usage(owned_record(request, session_id))


@router.post(
    "/sessions/{session_id}/usage/increments",
    response={200: UsageOut, ERROR_STATUSES: ErrorOut},
    summary="Add usage",
)
def add_usage_increment(request: HttpRequest, session_id: str, payload: UsageIn):
    """Add token counts and cost (atomic increments, safe under concurrency); returns the new totals."""
    manager = owned_manager(request, session_id)
    manager.add_usage(session_id, payload.input_tokens, payload.output_tokens, payload.cost)
    return _usage(owned_record(request, session_id, manager))


@router.post(
    "/sessions/{session_id}/usage",
    response={200: SessionOut, ERROR_STATUSES: ErrorOut},
    summary="Add usage (deprecated: POST /sessions/{session_id}/usage/increments)",
    deprecated=True,
)
def add_usage(request: HttpRequest, session_id: str, payload: UsageIn):
    """Deprecated alias that returns the whole session; use ``POST …/usage/increments``."""
    manager = owned_manager(request, session_id)
    manager.add_usage(session_id, payload.input_tokens, payload.output_tokens, payload.cost)
    return owned_record(request, session_id, manager)
