"""Compaction: enqueue (202 + a status to poll), its status, and the stored overlays (list, add)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from .. import tasks
from ..exceptions import CompactionNotConfigured
from .access import owned_manager, require_message
from .config import config_name
from .errors import ApiError
from .schemas import (
    ERROR_STATUSES,
    CompactIn,
    CompactionIn,
    CompactionList,
    CompactionOut,
    CompactionStatusOut,
    ErrorOut,
)

router = Router(tags=["compaction"])


def _status(request: HttpRequest, session_id: str, manager: Any) -> dict[str, Any]:
    job = tasks.get_compaction_status(session_id, using=manager.using)
    return {
        "session_id": session_id,
        "status": str(job.get("status") or "idle"),
        "error": str(job.get("last_error") or ""),
        "attempts": job.get("attempts"),
        "requested_at": job.get("requested_at"),
        "finished_at": job.get("finished_at"),
        "status_url": request.path,
    }


@router.post(
    "/sessions/{session_id}/compact",
    response={202: CompactionStatusOut, ERROR_STATUSES: ErrorOut},
    summary="Compact now (asynchronous)",
)
def compact(request: HttpRequest, session_id: str, payload: CompactIn | None = None):
    """Queue a compaction of the path to ``leaf_id`` (default: latest leaf); poll ``GET …/compact`` for the outcome.

    A request while one is queued or running joins it.  With eager Celery (no
    broker) it has already run when the response is sent.
    """
    manager = owned_manager(request, session_id)
    leaf_id = payload.leaf_id if payload is not None else None
    if leaf_id is not None:
        require_message(manager, session_id, leaf_id)
    if getattr(manager.get_session(session_id), "_compact_fn", None) is None:
        raise CompactionNotConfigured("this API's session configuration has no compaction function")
    try:
        tasks.enqueue_compaction(config_name(manager), session_id, leaf_id, force=True, using=manager.using)
    except LookupError as exc:
        raise ApiError(409, "compaction_not_configured", str(exc)) from None
    return Status(202, _status(request, session_id, manager))


@router.get(
    "/sessions/{session_id}/compact",
    response={200: CompactionStatusOut, ERROR_STATUSES: ErrorOut},
    summary="Compaction status",
)
def compaction_status(request: HttpRequest, session_id: str):
    """``idle``, ``pending``, ``running``, ``succeeded`` or ``failed`` (with the error)."""
    manager = owned_manager(request, session_id)
    return _status(request, session_id, manager)


@router.get(
    "/sessions/{session_id}/compactions",
    response={200: CompactionList, ERROR_STATUSES: ErrorOut},
    summary="List compactions",
)
def list_compactions(request: HttpRequest, session_id: str):
    """Every stored overlay of the session, oldest first."""
    manager = owned_manager(request, session_id)
    return {"compactions": manager.get_compactions(session_id)}


@router.post(
    "/sessions/{session_id}/compactions",
    response={201: CompactionOut, ERROR_STATUSES: ErrorOut},
    summary="Add a compaction",
)
def add_compaction(request: HttpRequest, session_id: str, payload: CompactionIn):
    """Store an overlay that shows ``summary`` instead of ``from_message_id..to_message_id`` (both must exist)."""
    manager = owned_manager(request, session_id)
    require_message(manager, session_id, payload.from_message_id)
    require_message(manager, session_id, payload.to_message_id)
    stored = manager.add_compaction(session_id, payload.summary, payload.from_message_id, payload.to_message_id)
    return Status(201, stored)
