"""Model-call records (SPEC §8): a session's calls, newest first, and the exact input of one reply."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from ..models import ModelCallRecord
from .access import owned_manager
from .errors import not_found
from .http import PAGE_LIMIT, PAGE_OFFSET, page_size
from .schemas import ERROR_STATUSES, ErrorOut, ModelCallPage, ModelInputOut

router = Router(tags=["model calls"])


@router.get(
    "/sessions/{session_id}/model-calls",
    response={200: ModelCallPage, ERROR_STATUSES: ErrorOut},
    summary="List model calls",
)
def list_model_calls(request: HttpRequest, session_id: str, limit: int | None = PAGE_LIMIT, offset: int = PAGE_OFFSET):
    """The session's recorded model calls, newest first (model, parameters, usage, cost, latency, status)."""
    manager = owned_manager(request, session_id)
    session = manager.get_session(session_id)
    size = page_size(limit)
    items = session.model_calls(limit=size, offset=offset)
    count = ModelCallRecord.objects.using(manager.using).filter(session_id=session_id).count()
    return {"items": items, "count": count, "limit": size, "offset": offset}


@router.get(
    "/sessions/{session_id}/messages/{path:message_id}/model-input",
    response={200: ModelInputOut, ERROR_STATUSES: ErrorOut},
    summary="Model input of a reply",
)
def model_input(request: HttpRequest, session_id: str, message_id: str):
    """Exactly what the model was given when it wrote this message; 404 when no recorded call produced it."""
    manager = owned_manager(request, session_id)
    seen = manager.get_session(session_id).model_input(message_id)
    if seen is None:
        raise not_found("model_input")
    return seen
