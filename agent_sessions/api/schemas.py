"""Request and response bodies; they mirror the Python API's dataclasses (docs/api.md).

Messages stay UIMessage JSON: an object with ``id``, ``role`` and ``parts``
whose other keys (``createdAt``, metadata, …) and part contents round-trip
unchanged.  Every string a client sends is checked for NUL characters and
lone surrogates, which no database column can hold (the request guard checks
whole bodies, keys and nested parts included; these validators repeat it per field).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any, cast

from ninja import Schema
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from ..ui_message import UIMessage
from .limits import unstorable

MAX_INT = 2**31 - 1
"""Upper bound of counts and offsets a client sends (keeps SQL integers in range)."""
MAX_TOKENS_PER_CALL = 10**12


def _no_nul(value: str) -> str:
    reason = unstorable(value)
    if reason:
        raise ValueError(reason)
    return value


NO_NUL_PATTERN = r"^[^\u0000]*$"
_NO_NUL = {"pattern": NO_NUL_PATTERN}  # documents the rule (the validator enforces it, surrogates included)
Text = Annotated[str, Field(json_schema_extra=_NO_NUL), AfterValidator(_no_nul)]
Identifier = Annotated[str, Field(min_length=1, json_schema_extra=_NO_NUL), AfterValidator(_no_nul)]


def _iso_datetime(value: Any) -> Any:
    """ISO 8601 text only (pydantic alone would also read numbers as Unix timestamps)."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 date-time")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("must be an ISO 8601 date-time, e.g. 2026-01-31T12:00:00Z") from None
    try:  # in UTC: databases take offsets of at most ±15:59, ISO 8601 up to ±23:59
        return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed
    except OverflowError:
        raise ValueError("is out of range") from None


IsoDateTime = Annotated[datetime, BeforeValidator(_iso_datetime)]


def _finite_or_none(value: Any) -> Any:
    """A stored float JSON cannot carry (NaN, ±Infinity, written by a foreign writer) is sent as ``null``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


FiniteFloat = Annotated[
    float | None,
    BeforeValidator(_finite_or_none),
    Field(description="A number; null when the stored value is not finite (NaN or ±Infinity)."),
]
Limit = Annotated[int, Field(ge=1, le=MAX_INT)]
Offset = Annotated[int, Field(ge=0, le=MAX_INT)]


# ── errors ──────────────────────────────────────────────────────────
class ErrorOut(Schema):
    """Every error response: a human ``detail`` and a stable ``code``; validation errors list ``errors``."""

    detail: str
    code: str
    errors: list[dict[str, Any]] | None = None


# ── messages ────────────────────────────────────────────────────────
class UIMessageIn(BaseModel):
    """A UIMessage: ``id``, ``role``, ``parts`` and any other keys, kept as sent.

    A plain pydantic model: ninja's ``Schema`` drops extra keys.
    """

    model_config = ConfigDict(extra="allow")

    id: Identifier
    role: Identifier
    parts: list[Any]


class UIMessagePut(UIMessageIn):
    """A UIMessage sent to its own URL: ``id`` may be left out (the URL names the message)."""

    id: Identifier | None = None  # type: ignore[assignment]


class UIMessageOut(BaseModel):
    """A stored UIMessage (or a compaction summary standing in for a range)."""

    model_config = ConfigDict(extra="allow")

    id: str
    role: str
    parts: list[Any]


def message_dict(message: UIMessageIn) -> UIMessage:
    """The message as the Python API takes it (declared keys first, then the client's extra keys); the
    storage checks it as it does any caller's."""
    return cast(UIMessage, message.model_dump(mode="python"))


class AppendIn(Schema):
    """``parent_id`` omitted: child of the latest leaf; ``null``: a new root; an id: child of that message."""

    message: UIMessageIn
    parent_id: Identifier | None = None


class AppendOut(Schema):
    id: str
    inserted: bool


class MessageList(Schema):
    messages: list[UIMessageOut]


class MessagePage(Schema):
    """A page of messages: ``count`` is the total, ``limit``/``offset`` the page asked for."""

    messages: list[UIMessageOut]
    count: int
    limit: int
    offset: int


class RecentHistoryOut(Schema):
    """The longest recent suffix of the path that fits ``max_content_bytes`` (overlays applied)."""

    messages: list[UIMessageOut]
    truncated: bool
    total_content_bytes: int


class CountOut(Schema):
    count: int


class ForkMappingOut(Schema):
    """``{original message id: copied message id}`` of a fork (empty for a session that is not a fork)."""

    session_id: str
    parent_session_id: str | None
    mapping: dict[str, str]


class LeafOut(Schema):
    message: UIMessageOut | None


class PathLengthOut(Schema):
    length: int


class DeleteMessagesIn(Schema):
    ids: list[Text] = Field(max_length=10_000)


class DeletedOut(Schema):
    deleted: int


# ── sessions ────────────────────────────────────────────────────────
class SessionCreate(Schema):
    name: Text = ""
    model: Text | None = None
    source: Text | None = None
    parent_session_id: Text | None = None


class SessionRename(Schema):
    name: Text


class SessionOut(Schema):
    """Mirrors :class:`agent_sessions.SessionInfo`."""

    id: str
    name: str
    parent_session_id: str | None
    model: str | None
    source: str | None
    input_tokens: int
    output_tokens: int
    estimated_cost: FiniteFloat
    end_reason: str | None
    created_at: datetime | None
    updated_at: datetime | None


class SessionPage(Schema):
    items: list[SessionOut]
    count: int
    limit: int
    offset: int


class ModelCallOut(Schema):
    """One recorded model call (SPEC §8): what came of it; its input is the reply's ``model-input``."""

    id: str
    message_id: str | None
    leaf_id: str | None
    model: str
    params: dict[str, Any]
    usage: Any
    cost: FiniteFloat | None
    latency_ms: FiniteFloat | None
    status: str
    error: str | None
    started_at: datetime


class ModelCallPage(Schema):
    """A page of the session's model calls, newest first: ``count`` is the total."""

    items: list[ModelCallOut]
    count: int
    limit: int
    offset: int


class ModelInputOut(ModelCallOut):
    """What the model was given for one reply: the prompt text, the messages as sent (overlays as they
    were applied then, ids ``compaction_…``), the tools offered."""

    system: str | None
    messages: list[UIMessageOut]
    tools: list[Any]


class ForkIn(Schema):
    at_message_id: Identifier
    name: Text = ""


class SplitIn(Schema):
    summary: Text
    name: Text | None = None


class SessionEndIn(Schema):
    reason: Identifier = "ended"


class UsageOut(Schema):
    input_tokens: int
    output_tokens: int
    estimated_cost: FiniteFloat


def _json_number(value: Any) -> Any:
    """A JSON number as sent: ``true`` or ``"5"`` are rejected, not coerced (``5.0`` is the integer 5)."""
    if isinstance(value, (bool, str)) or value is None:
        raise ValueError("must be a JSON number")
    return value


Number = BeforeValidator(_json_number)


class UsageIn(Schema):
    input_tokens: Annotated[int, Number] = Field(0, ge=0, le=MAX_TOKENS_PER_CALL)
    output_tokens: Annotated[int, Number] = Field(0, ge=0, le=MAX_TOKENS_PER_CALL)
    cost: Annotated[float, Number] = Field(0.0, ge=0, le=1e9, allow_inf_nan=False)


# ── search ──────────────────────────────────────────────────────────
class SearchResultOut(Schema):
    """Mirrors :class:`agent_sessions.SearchResult`; ``content`` is the message's search text."""

    id: str
    role: str
    content: str
    created_at: datetime | str | None = None
    session_id: str | None = None


class SearchOut(Schema):
    """A page of hits, best first (``limit``/``offset`` as asked; counting every match would cost a full scan)."""

    results: list[SearchResultOut]
    limit: int
    offset: int


# ── compaction ──────────────────────────────────────────────────────
class CompactIn(Schema):
    leaf_id: Identifier | None = None


class CompactionStatusOut(Schema):
    """State of the session's compaction job (poll it after a 202)."""

    session_id: str
    status: str
    error: str = ""
    attempts: int | None = None
    requested_at: datetime | None = None
    finished_at: datetime | None = None
    status_url: str | None = None


class CompactionIn(Schema):
    summary: Text
    from_message_id: Identifier
    to_message_id: Identifier


class CompactionOut(Schema):
    """Mirrors :class:`agent_sessions.StoredCompaction`."""

    id: str
    summary: str
    from_message_id: str
    to_message_id: str
    created_at: datetime | str | None = None


class CompactionList(Schema):
    compactions: list[CompactionOut]
    count: int
    limit: int
    offset: int


# ── context and prompt ──────────────────────────────────────────────
class ContextBlockOut(Schema):
    """Mirrors :class:`agent_sessions.ContextBlock`."""

    label: str
    description: str | None
    content: str
    tokens: int
    max_tokens: int | None
    writable: bool
    is_skill: bool
    is_searchable: bool


class ContextBlockList(Schema):
    blocks: list[ContextBlockOut]
    count: int
    limit: int
    offset: int


class ContextWriteIn(Schema):
    content: Text


class PromptOut(Schema):
    prompt: str


class StoredPromptOut(Schema):
    """The stored (frozen) system prompt; ``null`` until it is frozen."""

    prompt: str | None
    frozen: bool


# ── tools ───────────────────────────────────────────────────────────
class ToolOut(Schema):
    """A tool's JSON Schema definition (what an LLM SDK needs)."""

    name: str
    description: str
    parameters: dict[str, Any]


class ToolList(Schema):
    tools: list[ToolOut]
    count: int
    limit: int
    offset: int


class ToolCallIn(Schema):
    # Any object, but no NUL in any string or key inside (422 ``invalid_arguments``); the document says
    # so through the ``NulFreeJson`` schema that :func:`.openapi.refine` adds.
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolResultOut(Schema):
    """What the tool returned (``Error: …`` when the arguments were wrong; tools never raise)."""

    name: str
    result: str


ERROR_STATUSES = frozenset({400, 401, 403, 404, 405, 409, 413, 414, 415, 422, 429, 500, 503})
"""Statuses every operation documents with :class:`ErrorOut` (412 too where ``If-Match`` applies)."""
PRECONDITION_STATUSES = ERROR_STATUSES | {412}
