"""Context blocks (list, get, replace, append) and the system prompt (freeze, refresh) of one session.

Blocks are declared by the API's session configuration and namespaced by
session id, so they are only reachable under a session the caller owns.
"""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router

from ..context.block import ContextBlock
from ..session import Session
from .access import owned_manager
from .errors import not_found
from .http import page
from .schemas import (
    ERROR_STATUSES,
    MAX_INT,
    ContextBlockList,
    ContextBlockOut,
    ContextWriteIn,
    ErrorOut,
    PromptOut,
    StoredPromptOut,
)

router = Router(tags=["context"])


def _session(request: HttpRequest, session_id: str) -> Session:
    return owned_manager(request, session_id).get_session(session_id)


def _block(session: Session, label: str) -> ContextBlock:
    """The session's block ``label``, or a 404."""
    block = session.get_context_block(label)
    if block is None:
        raise not_found("context_block")
    return block


def _writable(request: HttpRequest, session_id: str, label: str) -> Session:
    """The caller's session, once ``label`` is known to be one of its blocks (404 otherwise)."""
    session = _session(request, session_id)
    _block(session, label)
    return session


@router.get(
    "/sessions/{session_id}/context",
    response={200: ContextBlockList, ERROR_STATUSES: ErrorOut},
    summary="Context blocks",
)
def list_blocks(
    request: HttpRequest,
    session_id: str,
    limit: int | None = Query(None, ge=1, le=MAX_INT),
    offset: int = Query(0, ge=0, le=MAX_INT),
):
    """Blocks in registration order, with token usage and what they allow (a page; ``count`` is the total)."""
    blocks, count, size = page(_session(request, session_id).get_context_blocks(), limit, offset)
    return {"blocks": blocks, "count": count, "limit": size, "offset": offset}


@router.get(
    "/sessions/{session_id}/context/{label}",
    response={200: ContextBlockOut, ERROR_STATUSES: ErrorOut},
    summary="Get a context block",
)
def get_block(request: HttpRequest, session_id: str, label: str):
    return _block(_session(request, session_id), label)


@router.put(
    "/sessions/{session_id}/context/{label}",
    response={200: ContextBlockOut, ERROR_STATUSES: ErrorOut},
    summary="Replace a context block",
)
def replace_block(request: HttpRequest, session_id: str, label: str, payload: ContextWriteIn):
    """Replace a writable block's content (409 readonly; 422 over its ``max_tokens``, content unchanged)."""
    return _writable(request, session_id, label).replace_context_block(label, payload.content)


@router.post(
    "/sessions/{session_id}/context/{label}/append",
    response={200: ContextBlockOut, ERROR_STATUSES: ErrorOut},
    summary="Append to a context block",
)
def append_block(request: HttpRequest, session_id: str, label: str, payload: ContextWriteIn):
    """Append to a writable block (a newline is inserted unless the block is empty or the text starts with one)."""
    return _writable(request, session_id, label).append_context_block(label, payload.content)


@router.get(
    "/sessions/{session_id}/system-prompt",
    response={200: StoredPromptOut, ERROR_STATUSES: ErrorOut},
    summary="Stored system prompt",
)
def get_prompt(request: HttpRequest, session_id: str):
    """The frozen prompt as stored, without rendering or storing anything (``null`` before the first freeze)."""
    prompt = _session(request, session_id).stored_system_prompt()
    return {"prompt": prompt, "frozen": prompt is not None}


@router.post(
    "/sessions/{session_id}/system-prompt/freeze",
    response={200: PromptOut, ERROR_STATUSES: ErrorOut},
    summary="Freeze the system prompt",
)
def freeze_prompt(request: HttpRequest, session_id: str):
    """The stored prompt; the first call renders and stores it (later block writes do not change it)."""
    return {"prompt": _session(request, session_id).freeze_system_prompt()}


@router.post(
    "/sessions/{session_id}/system-prompt/refresh",
    response={200: PromptOut, ERROR_STATUSES: ErrorOut},
    summary="Refresh the system prompt",
)
def refresh_prompt(request: HttpRequest, session_id: str):
    """Re-read every block, re-render and store the prompt."""
    return {"prompt": _session(request, session_id).refresh_system_prompt()}
