"""Compaction: request a run (202 + a status to poll), its status, and the stored overlays (list, add, get, delete)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Status

from .. import tasks
from ..exceptions import CompactionNotConfigured
from ..manager.rows import update as touch_record
from ..models import Compaction
from .access import owned_manager, require_message
from .config import config_name

if TYPE_CHECKING:
    from ..types import StoredCompaction
from .errors import ApiError, not_found
from .http import page, set_location, url
from .schemas import (
    ERROR_STATUSES,
    MAX_INT,
    CompactIn,
    CompactionIn,
    CompactionList,
    CompactionOut,
    CompactionStatusOut,
    ErrorOut,
)

router = Router(tags=["compaction"])


RETRY_AFTER_SECONDS = 1
"""How long a client should wait before polling the status of a requested compaction."""


def _status(request: HttpRequest, session_id: str, manager: Any) -> dict[str, Any]:
    job = tasks.get_compaction_status(session_id, using=manager.using)
    status = str(job.get("status") or "idle")
    if status == "idle" and job.get("finished_at") is not None:
        status = "nothing_to_compact"  # a run finished and found nothing worth summarising
    return {
        "session_id": session_id,
        "status": status,
        "error": str(job.get("last_error") or ""),
        "attempts": job.get("attempts"),
        "requested_at": job.get("requested_at"),
        "finished_at": job.get("finished_at"),
        "status_url": url("sessions", session_id, "compaction-status"),
    }


def _request_compaction(request: HttpRequest, response: HttpResponse, session_id: str, payload: CompactIn | None):
    manager = owned_manager(request, session_id)
    leaf_id = payload.leaf_id if payload is not None else None
    if leaf_id is not None:
        require_message(manager, session_id, leaf_id)
    if not manager.get_session(session_id).compaction.configured:
        raise CompactionNotConfigured("this API's session configuration has no compaction function")
    try:
        tasks.enqueue_compaction(config_name(manager), session_id, leaf_id, force=True, using=manager.using)
    except LookupError as exc:
        raise ApiError(409, "compaction_not_configured", str(exc)) from None
    body = _status(request, session_id, manager)
    response["Location"] = body["status_url"]
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return Status(202, body)


_COMPACT_DOC = """Queue a compaction of the path to ``leaf_id`` (default: latest leaf).

``Location`` is the status to poll (after ``Retry-After`` seconds).  A request
while one is queued or running joins it.  With eager Celery (no broker) it has
already run when the response is sent."""


@router.post(
    "/sessions/{session_id}/compaction-requests",
    response={202: CompactionStatusOut, ERROR_STATUSES: ErrorOut},
    summary="Request a compaction (asynchronous)",
    description=_COMPACT_DOC,
)
def request_compaction(request: HttpRequest, response: HttpResponse, session_id: str, payload: CompactIn | None = None):
    return _request_compaction(request, response, session_id, payload)


@router.get(
    "/sessions/{session_id}/compaction-status",
    response={200: CompactionStatusOut, ERROR_STATUSES: ErrorOut},
    summary="Compaction status",
)
def get_compaction_status(request: HttpRequest, session_id: str):
    """``idle``, ``pending``, ``running``, ``succeeded``, ``nothing_to_compact`` or ``failed`` (with the error)."""
    manager = owned_manager(request, session_id)
    return _status(request, session_id, manager)


@router.post(
    "/sessions/{session_id}/compact",
    response={202: CompactionStatusOut, ERROR_STATUSES: ErrorOut},
    summary="Compact now (deprecated: POST /sessions/{session_id}/compaction-requests)",
    deprecated=True,
)
def compact(request: HttpRequest, response: HttpResponse, session_id: str, payload: CompactIn | None = None):
    """Deprecated alias of ``POST /sessions/{session_id}/compaction-requests``."""
    return _request_compaction(request, response, session_id, payload)


@router.get(
    "/sessions/{session_id}/compact",
    response={200: CompactionStatusOut, ERROR_STATUSES: ErrorOut},
    summary="Compaction status (deprecated: GET /sessions/{session_id}/compaction-status)",
    deprecated=True,
)
def compaction_status(request: HttpRequest, session_id: str):
    """Deprecated alias of ``GET /sessions/{session_id}/compaction-status``."""
    manager = owned_manager(request, session_id)
    return _status(request, session_id, manager)


@router.get(
    "/sessions/{session_id}/compactions",
    response={200: CompactionList, ERROR_STATUSES: ErrorOut},
    summary="List compactions",
)
def list_compactions(
    request: HttpRequest,
    session_id: str,
    limit: int | None = Query(None, ge=1, le=MAX_INT),
    offset: int = Query(0, ge=0, le=MAX_INT),
):
    """Stored overlays of the session, oldest first (a page; ``count`` is the total)."""
    manager = owned_manager(request, session_id)
    items, count, size = page(manager.get_compactions(session_id), limit, offset)
    return {"compactions": items, "count": count, "limit": size, "offset": offset}


def _check_range(manager: Any, session_id: str, from_id: str, to_id: str) -> None:
    """422 unless ``from`` is ``to`` or one of its ancestors (a range read root→leaf)."""
    path = [row.id for row in manager.get_session(session_id).get_history_row_stats(to_id)]
    if from_id not in path:
        raise ApiError(
            422,
            "invalid_range",
            "from_message_id must be to_message_id or one of its ancestors (the range runs root to leaf).",
        )


@router.post(
    "/sessions/{session_id}/compactions",
    response={201: CompactionOut, ERROR_STATUSES: ErrorOut},
    summary="Add a compaction",
)
def add_compaction(request: HttpRequest, response: HttpResponse, session_id: str, payload: CompactionIn):
    """Store an overlay that shows ``summary`` instead of ``from_message_id..to_message_id`` (both must exist,
    ``from`` at or before ``to`` on one path: 422 otherwise).  ``Location`` names the new overlay."""
    manager = owned_manager(request, session_id)
    require_message(manager, session_id, payload.from_message_id)
    require_message(manager, session_id, payload.to_message_id)
    _check_range(manager, session_id, payload.from_message_id, payload.to_message_id)
    stored = manager.add_compaction(session_id, payload.summary, payload.from_message_id, payload.to_message_id)
    set_location(response, "sessions", session_id, "compactions", stored.id)
    return Status(201, stored)


def _stored(manager: Any, session_id: str, compaction_id: str) -> StoredCompaction:
    for stored in manager.get_compactions(session_id):
        if stored.id == compaction_id:
            return stored
    raise not_found("compaction")


@router.get(
    "/sessions/{session_id}/compactions/{compaction_id}",
    response={200: CompactionOut, ERROR_STATUSES: ErrorOut},
    summary="Get a compaction",
)
def get_compaction(request: HttpRequest, session_id: str, compaction_id: str):
    manager = owned_manager(request, session_id)
    return _stored(manager, session_id, compaction_id)


@router.delete(
    "/sessions/{session_id}/compactions/{compaction_id}",
    response={204: None, ERROR_STATUSES: ErrorOut},
    summary="Delete a compaction",
)
def delete_compaction(request: HttpRequest, session_id: str, compaction_id: str):
    """Remove an overlay: history shows the original messages of its range again."""
    manager = owned_manager(request, session_id)
    deleted, _ = (
        Compaction.objects.using(manager.using).filter(session_id=session_id, compaction_id=compaction_id).delete()
    )
    if not deleted:
        raise not_found("compaction")
    touch_record(manager.using, session_id)
    return Status(204, None)
